import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { defineTask, type JobContext } from '../../src/index.js';

// Compile-time guarantees of job.invoke, checked by Vitest's typecheck mode (`npm test`): a task's
// payload is checked against its schema's input and the call resolves to the task's result type;
// a queue name takes any payload and resolves to the type asked for (unknown by default).

const charge = defineTask('invoke-charge', {
  schema: z.object({ cents: z.number() }),
  handler: async (job) => ({ receipt: `r-${job.payload.cents}` }),
});

declare const job: JobContext;

describe('job.invoke', () => {
  it("resolves to the invoked task's result type", () => {
    expectTypeOf(job.invoke(charge, { cents: 100 })).toEqualTypeOf<Promise<{ receipt: string }>>();
    expectTypeOf(job.invoke(charge, { cents: 1 }, { name: 'charge-again', maxAttempts: 3 })).toEqualTypeOf<
      Promise<{ receipt: string }>
    >();
  });

  it('refuses a payload of the wrong shape for a task, and options it does not know', () => {
    // @ts-expect-error `cents` must be a number
    void job.invoke(charge, { cents: '100' });
    // @ts-expect-error `cents` is missing
    void job.invoke(charge, {});
    // @ts-expect-error no such option
    void job.invoke(charge, { cents: 1 }, { delayMs: 5 });
  });

  it('a queue name takes any payload; its result is unknown unless named', () => {
    expectTypeOf(job.invoke('invoke-any', { anything: ['goes'] })).toEqualTypeOf<Promise<unknown>>();
    expectTypeOf(job.invoke<number>('invoke-any', 1)).toEqualTypeOf<Promise<number>>();
  });
});
