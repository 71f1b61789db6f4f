import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Type tests (test/types/*.test-d.ts): compile-time errors the public API must raise, checked
    // by tsc on every `npm test`; a wrong type, or an @ts-expect-error that is no error, fails it.
    typecheck: { enabled: true, include: ['test/types/**/*.test-d.ts'], tsconfig: './tsconfig.json' },
    globalSetup: ['test/support/global-setup.ts'],
    // Two cores: two files at a time, each in its own schema on the shared server.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
