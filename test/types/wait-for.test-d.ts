import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { defineTask, Leasehold, type WaitForResult } from '../../src/index.js';

// Compile-time guarantees of results and waiting, checked by Vitest's typecheck mode (`npm test`).

const lh = new Leasehold({ connectionString: 'postgres://unused/never-connected' });

const invoice = defineTask('invoice', {
  schema: z.object({ orderId: z.string() }),
  handler: async (job) => ({ invoiceId: `inv-${job.payload.orderId}`, total: 42 }),
});
const plain = defineTask<{ n: number }>('plain', { handler: async () => {} });

describe('results and waiting', () => {
  it("enqueueAndWait's result is the task handler's return type; a queue name gives unknown", () => {
    expectTypeOf(lh.enqueueAndWait(invoice, { orderId: 'o-1' })).resolves.toEqualTypeOf<
      WaitForResult<{ invoiceId: string; total: number }>
    >();
    // Naming the payload type gives Result its default (TypeScript infers none once one is named).
    expectTypeOf(lh.enqueueAndWait(plain, { n: 1 })).resolves.toEqualTypeOf<WaitForResult<unknown>>();
    expectTypeOf(lh.enqueueAndWait('emails', { any: 'thing' })).resolves.toEqualTypeOf<WaitForResult>();
    // @ts-expect-error the payload must match the task's schema
    void lh.enqueueAndWait(invoice, { order: 'o-1' });
    // @ts-expect-error enqueueAndWait cannot join a transaction
    void lh.enqueueAndWait('emails', {}, { client: lh.pool });
  });

  it('waitFor is unknown by default, or the type the caller names', () => {
    expectTypeOf(lh.waitFor('1')).resolves.toEqualTypeOf<WaitForResult<unknown>>();
    expectTypeOf(lh.waitFor<{ ok: boolean }>('1', { timeoutMs: 5 })).resolves.toHaveProperty('result');
    // @ts-expect-error a misspelt option is a compile error
    void lh.waitFor('1', { timeout: 5 });
  });
});
