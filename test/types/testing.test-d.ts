import { describe, expectTypeOf, it } from 'vitest';
import { defineTask, type IdleRunResult, Leasehold } from '../../src/index.js';
import { drain, expectEnqueued, type PendingJob } from '../../src/testing/index.js';

// Compile-time guarantees of runUntilIdle and leasehold/testing, checked by Vitest's typecheck
// mode (`npm test`): each `@ts-expect-error` line must be an error, or the type test fails.

const lh = new Leasehold({ connectionString: 'postgres://unused/never-connected' });
const invoice = defineTask<{ customer: { id: string }; total: number }>('invoice', {
  handler: async () => {},
});

describe('runUntilIdle and leasehold/testing types', () => {
  it('runUntilIdle and drain resolve with the counts', () => {
    expectTypeOf(lh.runUntilIdle({ tasks: [invoice], maxJobs: 10 })).toEqualTypeOf<Promise<IdleRunResult>>();
    expectTypeOf(drain(lh.worker({ tasks: [invoice] }))).toEqualTypeOf<Promise<IdleRunResult>>();
    expectTypeOf(drain(lh, { tasks: [invoice] })).toEqualTypeOf<Promise<IdleRunResult>>();
    // @ts-expect-error a worker's drain takes bounds only, not tasks
    void drain(lh.worker({ tasks: [invoice] }), { tasks: [invoice] });
  });

  it("expectEnqueued checks a task's match against its payload type", () => {
    expectTypeOf(expectEnqueued(lh, invoice, { customer: { id: 'c1' } })).toEqualTypeOf<
      Promise<PendingJob[]>
    >();
    void expectEnqueued(lh, invoice, (payload) => payload.total > 100);
    void expectEnqueued(lh, 'any-queue', { whatever: true });
    // @ts-expect-error a misspelt key
    void expectEnqueued(lh, invoice, { custmer: { id: 'c1' } });
    // @ts-expect-error a value of the wrong type
    void expectEnqueued(lh, invoice, { total: 'many' });
    // @ts-expect-error the predicate sees the typed payload
    void expectEnqueued(lh, invoice, (payload) => payload.amount > 100);
  });
});
