import { defineConfig, mergeConfig } from 'vitest/config';
import base, { CLI_PROCESS_FILES, OWN_SERVER_FILES } from './vitest.config.js';

// The suite as `npm test` runs it, for a second pass against another server (DATABASE_URL: the
// system PostgreSQL, or PgBouncer), without the files that would not use it (OWN_SERVER_FILES), the
// files whose time is the CLI's processes starting (CLI_PROCESS_FILES), and the type tests (they
// need no server): .ci/run.
export default mergeConfig(
  base,
  defineConfig({
    test: {
      exclude: [...OWN_SERVER_FILES, ...CLI_PROCESS_FILES],
      typecheck: { enabled: false },
    },
  }),
);
