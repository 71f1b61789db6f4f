import { describe, it } from 'vitest';
import { expectLongHandlerSucceedsOnce } from '../support/long-handler.js';

// `npm run test:slow` (vitest.slow.config.ts), once per CI run: real time, real defaults. The fast
// version (same checks, a 1 s lease) is in test/renewal-defaults.test.ts, part of `npm test`.
describe('renewal at the real worker defaults', () => {
  it('a handler that runs 90 s without calling progress() succeeds exactly once (30 s leases, renewed while it runs)', async () => {
    await expectLongHandlerSucceedsOnce({ runMs: 90_000 });
  }, 180_000);
});
