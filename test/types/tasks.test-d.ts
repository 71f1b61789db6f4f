import * as v from 'valibot';
import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import {
  defineTask,
  type EnqueueResult,
  type JobContext,
  Leasehold,
  type TaskOutput,
  type TaskPayload,
  type TaskResult,
} from '../../src/index.js';

// Compile-time guarantees of typed tasks, checked by Vitest's typecheck mode (`npm test`): each
// `@ts-expect-error` line must be an error, or the type test fails.

const lh = new Leasehold({ connectionString: 'postgres://unused/never-connected' });

const sendEmail = defineTask('send-email', {
  schema: z.object({ to: z.email(), sendAt: z.iso.datetime().transform((s) => new Date(s)) }),
  handler: async (job) => {
    expectTypeOf(job.payload).toEqualTypeOf<{ to: string; sendAt: Date }>();
    return { messageId: 'm-1' };
  },
});

const resize = defineTask('resize-image', {
  schema: v.object({ url: v.string(), width: v.number() }),
  handler: async (job) => {
    expectTypeOf(job.payload).toEqualTypeOf<{ url: string; width: number }>();
  },
});

describe('typed tasks', () => {
  it('payload and result types flow from the schema and the handler', () => {
    expectTypeOf<TaskPayload<typeof sendEmail>>().toEqualTypeOf<{ to: string; sendAt: string }>();
    expectTypeOf<TaskOutput<typeof sendEmail>>().toEqualTypeOf<{ to: string; sendAt: Date }>();
    expectTypeOf<TaskResult<typeof sendEmail>>().toEqualTypeOf<{ messageId: string }>();
    expectTypeOf(
      lh.enqueue(sendEmail, { to: 'a@example.com', sendAt: '2030-01-01T00:00:00Z' }),
    ).toEqualTypeOf<Promise<EnqueueResult>>();
  });

  it('enqueue of a task refuses a payload of the wrong shape at compile time', () => {
    // @ts-expect-error `to` is missing
    void lh.enqueue(sendEmail, { sendAt: '2030-01-01T00:00:00Z' });
    // @ts-expect-error `width` must be a number
    void lh.enqueue(resize, { url: 'https://example.com/a.png', width: '640' });
    // @ts-expect-error the input type is the schema's input (a string), not its output (a Date)
    void lh.enqueue(sendEmail, { to: 'a@example.com', sendAt: new Date() });
    // @ts-expect-error enqueueMany checks every item's payload
    void lh.enqueueMany(resize, [{ payload: { url: 'x', width: 1 } }, { payload: { url: 'y' } }]);
    void lh.enqueueMany(resize, [{ payload: { url: 'x', width: 1 }, priority: 3 }]);
  });

  it('a queue given by name keeps taking any payload', () => {
    void lh.enqueue('send-email', { anything: ['goes'] });
    void lh.enqueueMany('send-email', [{ payload: 42 }]);
  });

  it('a task without a schema takes its payload type from the type argument', () => {
    const plain = defineTask<{ id: number }>('plain', {
      handler: async (job) => {
        expectTypeOf(job.payload).toEqualTypeOf<{ id: number }>();
        expectTypeOf(job).toMatchTypeOf<JobContext<{ id: number }>>();
      },
    });
    void lh.enqueue(plain, { id: 1 });
    // @ts-expect-error `id` is a number
    void lh.enqueue(plain, { id: '1' });
  });

  it('a handler may not use the payload as something the schema does not say', () => {
    defineTask('wrong-use', {
      schema: z.object({ n: z.number() }),
      handler: async (job) => {
        // @ts-expect-error `n` is a number, not a string
        job.payload.n.toUpperCase();
      },
    });
  });

  it('workers take tasks and queues, mixed', () => {
    expectTypeOf(lh.worker).toBeCallableWith({ tasks: [sendEmail, resize] });
    expectTypeOf(lh.worker).toBeCallableWith({ tasks: [sendEmail], queues: { other: async () => {} } });
  });
});
