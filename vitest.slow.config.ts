import { defineConfig } from 'vitest/config';
import { shared } from './vitest.config.js';

// `npm run test:slow`: tests that must take real time under the real defaults (a handler running
// 90 s past three 30 s leases), too slow for `npm test`; .ci/run runs them once.
export default defineConfig({
  test: {
    ...shared,
    include: ['test/slow/**/*.test.ts'],
    testTimeout: 240_000,
  },
});
