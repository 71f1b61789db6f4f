import { defineConfig } from 'vitest/config';
import { shared } from './vitest.config.js';

// `npm run test:system`: the tests that need system packages (PgBouncer). Its first global setup
// fails the run, saying what to install, when one is missing.
export default defineConfig({
  test: {
    ...shared,
    include: ['test/system/**/*.test.ts'],
    globalSetup: ['test/system/global-setup.ts', ...shared.globalSetup],
  },
});
