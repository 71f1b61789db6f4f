import { defineConfig } from 'vitest/config';

/** Settings every suite shares: one PostgreSQL per run, two files at a time on two cores. */
export const shared = {
  globalSetup: ['test/support/global-setup.ts'],
  // Two cores: two files at a time, each in its own schema on the shared server.
  maxWorkers: 2,
  testTimeout: 30_000,
  hookTimeout: 60_000,
};

// `npm test`: everything that needs only Node.js and npm. The system suite (test/system, needs
// PgBouncer from the system's packages) and the slow suite (test/slow, real-length timings) have
// configurations of their own: vitest.system.config.ts and vitest.slow.config.ts.
export default defineConfig({
  test: {
    ...shared,
    include: ['test/**/*.test.ts'],
    exclude: ['test/system/**', 'test/slow/**', '**/node_modules/**'],
    // Type tests (test/types/*.test-d.ts): compile-time errors the public API must raise, checked
    // by tsc on every `npm test`; a wrong type, or an @ts-expect-error that is no error, fails it.
    typecheck: { enabled: true, include: ['test/types/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
  },
});
