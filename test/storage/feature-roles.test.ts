import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/index.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { roleClient } from '../support/roles.js';
import { started } from '../support/worker.js';

// Issue 17 with the capabilities of issues 15 and 16: each legitimate path works under the schema's
// producer or worker role alone, through its functions (viaFunctions), with no table privilege to
// write: results, progress, flows (children released by the worker's completions, job.parents()),
// rate-limited claims, dedupe modes, waiting for a job.

describe('results, progress, flows and rate limits under the worker role', () => {
  it('a worker process stores results and progress, runs a flow to its end and claims from a rate-limited queue', async () => {
    const owner = await migratedClient();
    const producer = await roleClient(owner.schema, 'producer');
    const workerRole = await roleClient(owner.schema, 'worker');
    await owner.configureQueue('roles-limited', {
      rateLimit: { max: 100, perMs: 60_000 },
      concurrencyLimit: 2,
    });
    const limited = await producer.enqueueMany(
      'roles-limited',
      [1, 2, 3].map((n) => ({ payload: { n } })),
    );
    const { ids: flow } = await producer.enqueueFlow([
      { ref: 'fetch', queue: 'roles-flow', payload: { step: 'fetch' } },
      { ref: 'merge', queue: 'roles-flow', payload: { step: 'merge' }, dependsOn: ['fetch'] },
    ]);
    const { id: progressId } = await producer.enqueue('roles-progress', { p: 1 });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const seenParents: unknown[] = [];
    const worker = await started(
      workerRole.worker({
        queues: {
          'roles-limited': async (job) => ({ sent: (job.payload as { n: number }).n }),
          'roles-flow': async (job) => {
            const { step } = job.payload as { step: string };
            if (step === 'merge') seenParents.push(await job.parents());
            return { step };
          },
          'roles-progress': {
            leaseMs: 60_000,
            renew: 'progress',
            handler: async (job) => {
              await job.progress({ stage: 'half' });
              await released;
              return 'done';
            },
          },
        },
        recoveryIntervalMs: 0,
        agingPassIntervalMs: 0,
        scheduleIntervalMs: 0,
      }),
    );
    try {
      // The renewal function stored the progress (no UPDATE privilege on jobs).
      const running = await waitFor(
        async () => {
          const job = await producer.getJob(progressId);
          return job?.progress != null ? job : null;
        },
        { what: 'the progress detail to be stored under the worker role' },
      );
      expect(running).toMatchObject({ status: 'running', progress: { stage: 'half' }, payload: null });
      release();
      // The producer waits (wait_for_jobs() flags the job) and reads each result.
      expect(await producer.waitFor(progressId, { timeoutMs: 20_000 })).toMatchObject({
        status: 'succeeded',
        result: 'done',
      });
      for (const [i, id] of limited.ids.entries()) {
        expect(await producer.waitFor(id, { timeoutMs: 20_000 })).toMatchObject({ result: { sent: i + 1 } });
      }
      // The completion function released the child; the child read its parent's result.
      expect(await producer.waitFor(flow.merge as string, { timeoutMs: 20_000 })).toMatchObject({
        result: { step: 'merge' },
      });
      expect(seenParents).toEqual([
        [{ id: flow.fetch, ref: 'fetch', status: 'succeeded', result: { step: 'fetch' } }],
      ]);
    } finally {
      release();
      await worker.stop();
    }
    // The limited claims went through the throttled claim function, which keeps the limiter rows.
    const { rows } = await testPool(1).query(
      `SELECT claimed_total::int FROM "${owner.schema}".rate_limits WHERE queue_name = 'roles-limited'`,
    );
    expect(rows).toEqual([{ claimed_total: 3 }]);
  });

  it('a worker holding a rate-limited queue is cut short by the limit through its function', async () => {
    const owner = await migratedClient();
    const producer = await roleClient(owner.schema, 'producer');
    const worker = await roleClient(owner.schema, 'worker');
    await owner.configureQueue('roles-throttled', { rateLimit: { max: 2, perMs: 3_600_000 } });
    await producer.enqueueMany(
      'roles-throttled',
      [1, 2, 3, 4].map((n) => ({ payload: { n } })),
    );
    const first = await worker.claim({ queue: 'roles-throttled', owner: 'w', limit: 10 });
    expect(first.map((l) => l.payload)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(await worker.claim({ queue: 'roles-throttled', owner: 'w', limit: 10 })).toEqual([]);
    for (const lease of first) expect(await worker.complete(lease as Lease)).toBe(true);
  });
});

describe('dedupe, flows and waiting under the producer role', () => {
  it('a producer throttles, debounces and replaces (fencing out the running job), and waits for a job', async () => {
    const owner = await migratedClient();
    const producer = await roleClient(owner.schema, 'producer');
    const worker = await roleClient(owner.schema, 'worker');
    const hourly = { key: 'user-7', mode: 'throttle', windowMs: 3_600_000 } as const;
    const a = await producer.enqueue('roles-dedupe', { v: 1 }, { dedupe: hourly });
    const b = await producer.enqueue('roles-dedupe', { v: 2 }, { dedupe: hourly });
    expect([a.created, b.created, b.id]).toEqual([true, false, a.id]);
    const quiet = { key: 'doc-1', mode: 'debounce', windowMs: 60_000 } as const;
    const d1 = await producer.enqueue('roles-debounce', { rev: 1 }, { dedupe: quiet });
    const d2 = await producer.enqueue('roles-debounce', { rev: 2 }, { dedupe: quiet });
    expect(d2).toMatchObject({ id: d1.id, created: false });
    const { rows } = await testPool(1).query(`SELECT payload FROM "${owner.schema}".jobs WHERE id = $1`, [
      d1.id,
    ]);
    expect(rows).toEqual([{ payload: { rev: 2 } }]);
    // replace: the running job is cancelled (token bumped) and its worker's completion refused.
    const sync = { key: 'account-1', mode: 'replace' } as const;
    const first = await producer.enqueue('roles-sync', { v: 1 }, { dedupe: sync });
    const [lease] = await worker.claim({ queue: 'roles-sync', owner: 'w' });
    expect(lease?.jobId).toBe(first.id);
    const second = await producer.enqueue('roles-sync', { v: 2 }, { dedupe: sync });
    expect(second).toMatchObject({ created: true, cancelledJobId: first.id });
    expect(await worker.complete(lease as Lease)).toBe(false);
    const [next] = await worker.claim({ queue: 'roles-sync', owner: 'w' });
    expect(next).toMatchObject({ jobId: second.id, payload: { v: 2 } });
    expect(await worker.complete(next as Lease)).toBe(true);
    expect(await producer.waitFor(second.id, { timeoutMs: 5_000 })).toMatchObject({
      status: 'succeeded',
    });
    expect((await producer.getJob(first.id))?.status).toBe('cancelled');
  });
});
