import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import {
  type BatchJobContext,
  defineTask,
  type JobContext,
  Leasehold,
  type OutcomeResult,
  type TaskOutput,
  type TaskResult,
} from '../../src/index.js';

// Compile-time guarantees of batch handlers, checked by Vitest's typecheck mode: each
// `@ts-expect-error` line must be an error, or the type test fails.

const lh = new Leasehold({ connectionString: 'postgres://unused/never-connected' });

const sendEmails = defineTask('send-emails', {
  schema: z.object({ to: z.string() }),
  batch: { size: 100, waitMs: 200 },
  handler: async (jobs) => {
    expectTypeOf(jobs).toEqualTypeOf<BatchJobContext<{ to: string }>[]>();
    expectTypeOf(jobs[0]!.fail(new Error('x'))).toEqualTypeOf<Promise<OutcomeResult>>();
    return jobs.map((job) => ({ messageId: job.payload.to }));
  },
});

const untyped = defineTask<{ id: number }>('rows', {
  batch: { size: 10 },
  handler: async (jobs) => {
    expectTypeOf(jobs[0]!.payload).toEqualTypeOf<{ id: number }>();
  },
});

describe('batch tasks', () => {
  it('a batch task types its jobs from the schema, and its result per job from the array returned', () => {
    expectTypeOf<TaskOutput<typeof sendEmails>>().toEqualTypeOf<{ to: string }>();
    expectTypeOf<TaskResult<typeof sendEmails>>().toEqualTypeOf<{ messageId: string }>();
    void lh.enqueue(untyped, { id: 1 });
    // @ts-expect-error the payload is the schema's input
    void lh.enqueue(sendEmails, { to: 1 });
  });

  it('a single-job task keeps its job typed; a batch handler needs batch', () => {
    defineTask<{ id: number }>('one', {
      handler: async (job) => {
        expectTypeOf(job).toEqualTypeOf<JobContext<{ id: number }>>();
      },
    });
    defineTask<{ id: number }>('many', {
      // @ts-expect-error a handler of an array of jobs without `batch`
      handler: async (jobs: BatchJobContext<{ id: number }>[]) => jobs.length,
    });
    // @ts-expect-error batch.size is required
    defineTask('no-size', { batch: {}, handler: async (_jobs: BatchJobContext[]) => {} });
  });

  it("a worker's queues keep `(job) => ...` typed beside a batch queue", () => {
    lh.worker({
      queues: {
        one: { handler: async (job) => expectTypeOf(job).toEqualTypeOf<JobContext>() },
        alone: async (job) => expectTypeOf(job).toEqualTypeOf<JobContext>(),
        many: {
          batch: { size: 50 },
          handler: async (jobs: BatchJobContext<{ id: number }>[]) => jobs.map((job) => job.payload.id),
        },
      },
    });
  });
});
