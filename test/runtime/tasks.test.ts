import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTask, isLeaseholdError, type Logger, type ValidationError } from '../../src/index.js';
import { migratedClient, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

const emailSchema = z.object({
  to: z.email(),
  subject: z.string().default('(no subject)'),
  sendAt: z.iso.datetime().transform((text) => new Date(text)),
});

describe('a worker runs typed tasks', () => {
  it('runs tasks beside queues given by name; a handler sees the schema output; the worker says what it serves', async () => {
    const lh = await migratedClient();
    const seen: unknown[] = [];
    const sendEmail = defineTask('send-email', {
      schema: emailSchema,
      concurrency: 2,
      handler: async (job) => {
        seen.push({ subject: job.payload.subject, sendAt: job.payload.sendAt instanceof Date });
      },
    });
    let plainRuns = 0;
    const lines: { obj: Record<string, unknown>; msg?: string }[] = [];
    const at = (obj: Record<string, unknown>, msg?: string) => lines.push({ obj, msg });
    const logger: Logger = { debug: at, info: at, warn: at, error: at };
    const worker = lh.worker({
      tasks: [sendEmail],
      queues: { plain: async () => void plainRuns++ },
      logger,
      pollIntervalMs: 50,
    });
    expect(worker.queues).toEqual(['plain', 'send-email']);
    expect(worker.tasks).toEqual(['send-email']);
    const email = await lh.enqueue(sendEmail, { to: 'ada@example.com', sendAt: '2030-01-01T00:00:00Z' });
    const plain = await lh.enqueue('plain', {});
    await started(worker);
    const succeeded = async (id: string) => (await lh.getJob(id))?.status === 'succeeded';
    await waitFor(async () => (await succeeded(email.id)) && (await succeeded(plain.id)), {
      what: 'both jobs to succeed',
    });
    expect(seen).toEqual([{ subject: '(no subject)', sendAt: true }]);
    expect(plainRuns).toBe(1);
    const startLine = lines.find((line) => line.msg === 'leasehold: worker started');
    expect(startLine?.obj).toMatchObject({ queues: ['plain', 'send-email'], tasks: ['send-email'] });
  });

  it('a stored payload that no longer matches goes dead with PAYLOAD_SCHEMA at once: no retry spent, the issue in its history, no payload contents', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    let runs = 0;
    const sendEmail = defineTask('send-email', {
      schema: emailSchema,
      handler: async () => void runs++,
    });
    // An older producer's row, written by queue name (no schema check): `to` was called `email`.
    const secret = 'card-4111-1111-1111-1111';
    const { id } = await lh.enqueue(
      'send-email',
      { email: 'ada@example.com', note: secret, sendAt: '2030-01-01T00:00:00Z' },
      { maxAttempts: 5 },
    );
    const worker = await started(lh.worker({ tasks: [sendEmail], pollIntervalMs: 50 }));
    const job = await waitFor(
      async () => {
        const j = await lh.getJob(id, { history: true });
        return j?.status === 'dead' ? j : null;
      },
      { what: 'the job to go dead' },
    );
    expect(runs).toBe(0);
    expect(job.attemptCount).toBe(1);
    expect(job.lastErrorCode).toBe('PAYLOAD_SCHEMA');
    expect(job.lastErrorMessage).toMatch(/^stored payload does not match task send-email's schema: to: /);
    expect(job.lastErrorMessage?.length).toBeLessThanOrEqual(400);
    const death = job.history.find((event) => event.statusAfter === 'dead');
    expect(death?.errorCode).toBe('PAYLOAD_SCHEMA');
    expect(death?.message).toMatch(/to: /);
    expect(JSON.stringify(job.history)).not.toContain(secret);
    expect(JSON.stringify(job.history)).not.toContain('ada@example.com');
    expect(worker.counters.dead).toBe(1);
    expect(worker.counters.retried).toBe(0);
  });

  it('validation at claim runs in the worker once per job, and awaits an async validator', async () => {
    const lh = await migratedClient();
    let validations = 0;
    const asyncSchema = {
      '~standard': {
        version: 1 as const,
        vendor: 'test',
        validate: async (value: unknown) => {
          validations++;
          await new Promise((resolve) => setTimeout(resolve, 1));
          const n = (value as { n?: unknown }).n;
          return typeof n === 'number'
            ? { value: { n, doubled: n * 2 } }
            : { issues: [{ message: 'n is missing' }] };
        },
        types: undefined as unknown as { input: { n: number }; output: { n: number; doubled: number } },
      },
    };
    const doubled: number[] = [];
    const task = defineTask('double', {
      schema: asyncSchema,
      handler: async (job) => void doubled.push(job.payload.doubled),
    });
    await lh.enqueueMany(task, [{ payload: { n: 1 } }, { payload: { n: 2 } }, { payload: { n: 3 } }]);
    expect(validations).toBe(3); // at enqueue
    const bad = await lh.enqueue('double', { m: 1 });
    const worker = await started(lh.worker({ tasks: [task], pollIntervalMs: 50 }));
    await waitFor(() => worker.counters.completed === 3 && worker.counters.dead === 1, {
      what: 'three completions and one death',
    });
    expect(doubled.sort()).toEqual([2, 4, 6]);
    expect(validations).toBe(7); // and once per claimed job
    expect((await lh.getJob(bad.id))?.lastErrorMessage).toMatch(/\(root\): n is missing$/);
  });

  it('refuses to start with two tasks of one name, or a task and a queue of one name', async () => {
    const lh = await migratedClient();
    const a = defineTask('same', { handler: async () => undefined });
    const b = defineTask('same', { handler: async () => undefined });
    const refused = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err as ValidationError;
      }
      throw new Error('expected a ValidationError');
    };
    const twoTasks = refused(() => lh.worker({ tasks: [a, b] }));
    expect(isLeaseholdError(twoTasks, 'VALIDATION')).toBe(true);
    expect(twoTasks.field).toBe('tasks[1]');
    expect(twoTasks.message).toMatch(/same is already served/);
    const taskAndQueue = refused(() => lh.worker({ tasks: [a], queues: { same: async () => undefined } }));
    expect(taskAndQueue.field).toBe('tasks[0]');
    const nothing = refused(() => lh.worker({ tasks: [] }));
    expect(nothing.field).toBe('queues');
    const notTask = refused(() => lh.worker({ tasks: ['same' as never] }));
    expect(notTask.field).toBe('tasks[0]');
    // A task's queue options are checked like a queue's.
    const badLease = defineTask('short', { leaseMs: 10, handler: async () => undefined });
    expect(refused(() => lh.worker({ tasks: [badLease] })).field).toBe('queues.short.leaseMs');
  });
});
