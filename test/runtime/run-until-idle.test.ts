import { describe, expect, it } from 'vitest';
import { PermanentError, RetryableError, ValidationError } from '../../src/index.js';
import { countByStatus, expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { deferred } from '../support/worker.js';

describe('runUntilIdle', () => {
  it('runs exactly the jobs claimable now, each once, including due retries and jobs its handlers enqueue, and counts them', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const runs: string[] = [];
    const kinds = ['ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'permanent', 'permanent', 'later', 'again', 'spawn'];
    const ids = new Map<string, string>();
    for (const [i, kind] of kinds.entries()) {
      const { id } = await lh.enqueue('work', { kind, i });
      ids.set(id, kind);
    }
    const future = await lh.enqueue('work', { kind: 'ok', i: 99 }, { delayMs: 3_600_000 });
    const other = await lh.enqueue('other-queue', { kind: 'ok' });

    const result = await lh.runUntilIdle({
      queues: {
        work: async (job) => {
          runs.push(job.id);
          const { kind } = job.payload as { kind: string };
          if (kind === 'permanent') throw new PermanentError('bad input');
          // A retry due in a minute: it must not keep the run going.
          if (kind === 'later') throw new RetryableError('busy', { delayMs: 60_000 });
          // Fails once, asking to be retried at once: due again before the run can go idle.
          if (kind === 'again' && job.attempt === 1) throw new RetryableError('flaky', { delayMs: 0 });
          if (kind === 'spawn') await lh.enqueue('work', { kind: 'spawned' });
        },
      },
    });

    expect(result).toEqual({
      succeeded: 9, // six ok, 'again' on its second attempt, 'spawn' and the job it enqueued
      failed: 4, // two permanent (dead), 'later' (retry in a minute), 'again' once (retry at once)
      dead: 2,
      snoozed: 0,
      lost: 0,
      recovered: 0,
      endedBy: 'idle',
    });
    const again = [...ids].find(([, kind]) => kind === 'again')?.[0];
    const later = [...ids].find(([, kind]) => kind === 'later')?.[0] as string;
    // Every claimable job ran exactly once, except 'again', which ran twice (its retry was due).
    expect(runs.filter((id) => id !== again).length).toBe(new Set(runs.filter((id) => id !== again)).size);
    expect(runs.filter((id) => id === again)).toHaveLength(2);
    expect(runs).toHaveLength(kinds.length + 2);
    expect(runs).not.toContain(future.id);
    expect(runs).not.toContain(other.id);
    expect(await lh.getJob(later)).toMatchObject({ status: 'pending', attemptCount: 1 });
    const { rows } = await pool.query(
      `SELECT available_at > now() + interval '30 seconds' AS in_backoff FROM "${lh.schema}".jobs WHERE id = $1`,
      [later],
    );
    expect(rows[0].in_backoff).toBe(true);
    expect(await lh.getJob(future.id)).toMatchObject({ status: 'pending', attemptCount: 0 });
    expect(await countByStatus(pool, lh.schema)).toEqual({ succeeded: 9, dead: 2, pending: 3 });
  });

  it('maxJobs: runs that many and claims no more, so the rest is claimable by anyone at once', async () => {
    const lh = await migratedClient();
    await lh.enqueueMany(
      'bounded',
      Array.from({ length: 10 }, (_, i) => ({ payload: i })),
    );
    let ran = 0;
    const result = await lh.runUntilIdle({
      queues: { bounded: { concurrency: 3, handler: async () => void ran++ } },
      maxJobs: 4,
    });
    expect(result).toMatchObject({ succeeded: 4, failed: 0, lost: 0, endedBy: 'maxJobs' });
    expect(ran).toBe(4);
    const leases = await lh.claim({ queue: 'bounded', owner: 'another', limit: 10 });
    expect(leases).toHaveLength(6);
    expect(leases.every((lease) => lease.attempt === 1)).toBe(true);
  });

  it('maxMs: ends the run, aborting what still runs after shutdownTimeoutMs, and every lease it held is claimable by anyone at once, attempt refunded', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany(
      'timed',
      Array.from({ length: 6 }, (_, i) => ({ payload: i })),
    );
    const result = await lh.runUntilIdle({
      // One slot and five claimed ahead; the handler runs until its signal is aborted.
      queues: {
        timed: {
          concurrency: 1,
          prefetch: 5,
          handler: (job) =>
            new Promise((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason))),
        },
      },
      maxMs: 200,
      shutdownTimeoutMs: 0,
    });
    expect(result).toMatchObject({ succeeded: 0, failed: 0, lost: 0, endedBy: 'maxMs' });
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".jobs
       WHERE status = 'pending' AND attempt_count = 0 AND lease_owner IS NULL AND available_at <= now()`,
    );
    expect(rows[0].n).toBe(6);
    expect(await lh.claim({ queue: 'timed', owner: 'another', limit: 10 })).toHaveLength(6);
  });

  it('ending early hands back claimed jobs it never started at once, while a handler still runs, then lets that handler finish', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany(
      'handback',
      Array.from({ length: 6 }, (_, i) => ({ payload: i })),
    );
    const first = deferred();
    const release = deferred();
    const worker = lh.worker({
      // One slot, five claimed ahead into the buffer: one claim takes all six.
      queues: {
        handback: {
          concurrency: 1,
          prefetch: 5,
          handler: async () => {
            first.resolve();
            await release.promise;
          },
        },
      },
    });
    const running = worker.runUntilIdle();
    await first.promise;
    const stopping = worker.stop(); // the same ending as at maxMs
    await waitFor(
      async () => {
        const { rows } = await pool.query(
          `SELECT count(*) FILTER (WHERE status = 'pending' AND attempt_count = 0 AND lease_owner IS NULL)::int AS back,
                  count(*) FILTER (WHERE status = 'running')::int AS running
           FROM "${lh.schema}".jobs`,
        );
        return rows[0].back === 5 && rows[0].running === 1;
      },
      { what: 'five unstarted leases handed back' },
    );
    expect(await lh.claim({ queue: 'handback', owner: 'another', limit: 10 })).toHaveLength(5);
    release.resolve();
    await stopping;
    expect(await running).toMatchObject({ succeeded: 1, failed: 0, lost: 0, endedBy: 'stopped' });
    expect(await countByStatus(pool, lh.schema)).toEqual({ succeeded: 1, running: 5 });
  });

  it('a buffered job handed back for waiting past half its lease is claimed again and run in the same call', async () => {
    const lh = await migratedClient();
    const { ids } = await lh.enqueueMany('slowfirst', [{ payload: 'long' }, { payload: 'short' }]);
    const ran: unknown[] = [];
    const result = await lh.runUntilIdle({
      queues: {
        slowfirst: {
          // One slot, one job read ahead: the second waits in the buffer while the first runs
          // longer than half the lease, so it is handed back unstarted instead of started late.
          concurrency: 1,
          prefetch: 1,
          leaseMs: 2000,
          handler: async (job) => {
            if (job.payload === 'long') await new Promise((resolve) => setTimeout(resolve, 1100));
            ran.push(job.payload);
          },
        },
      },
    });
    expect(result).toMatchObject({ succeeded: 2, lost: 0, endedBy: 'idle' });
    expect(ran).toEqual(['long', 'short']);
    // It was handed back unstarted ('skipped', attempt refunded), then claimed again and completed.
    const short = await lh.getJob(ids[1] as string, { history: true });
    expect(short?.history.map((event) => event.kind)).toEqual([
      'enqueued',
      'claimed',
      'skipped',
      'claimed',
      'completed',
    ]);
    expect(short?.attemptCount).toBe(1);
  });

  it('recovers an expired lease first and runs that job, leaving a live lease of another worker alone', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const crashed = await lh.enqueue('recover', { n: 1 });
    const [lapsed] = await lh.claim({ queue: 'recover', owner: 'crashed', limit: 1 });
    expect(lapsed?.jobId).toBe(crashed.id);
    await expireLease(pool, lh.schema, crashed.id);
    const live = await lh.enqueue('recover', { n: 3 });
    const [held] = await lh.claim({ queue: 'recover', owner: 'alive', limit: 1, leaseMs: 60_000 });
    expect(held?.jobId).toBe(live.id);
    await lh.enqueue('recover', { n: 2 });

    const seen: unknown[] = [];
    const result = await lh.runUntilIdle({
      queues: { recover: async (job) => void seen.push(job.payload) },
    });
    expect(result).toMatchObject({ recovered: 1, succeeded: 2, lost: 0, endedBy: 'idle' });
    expect(seen).toEqual(expect.arrayContaining([{ n: 1 }, { n: 2 }]));
    expect(seen).toHaveLength(2);
    expect(await lh.getJob(crashed.id)).toMatchObject({ status: 'succeeded', attemptCount: 2 });
    expect(await lh.getJob(live.id)).toMatchObject({ status: 'running', leaseOwner: 'alive' });
  });

  it('a worker runs until idle again and again, then still starts as usual', async () => {
    const lh = await migratedClient();
    const done: number[] = [];
    const worker = lh.worker({ queues: { again: async (job) => void done.push(job.payload as number) } });
    await lh.enqueue('again', 1);
    expect(await worker.runUntilIdle()).toMatchObject({ succeeded: 1, endedBy: 'idle' });
    await lh.enqueue('again', 2);
    expect(await worker.runUntilIdle({ maxJobs: 5 })).toMatchObject({ succeeded: 1, endedBy: 'idle' });
    expect(worker.counters.completed).toBe(2);
    await worker.start();
    try {
      await lh.enqueue('again', 3);
      await waitFor(() => done.length === 3, { what: 'the started worker to run the third job' });
    } finally {
      await worker.stop();
    }
    expect(done).toEqual([1, 2, 3]);
  });

  it('stop() during a run ends it as stopped, after the running handler finishes', async () => {
    const lh = await migratedClient();
    await lh.enqueue('stoppable', {});
    const begun = deferred();
    const release = deferred();
    const worker = lh.worker({
      queues: {
        stoppable: async () => {
          begun.resolve();
          await release.promise;
        },
      },
    });
    const run = worker.runUntilIdle();
    await begun.promise;
    const stopping = worker.stop();
    release.resolve();
    await stopping;
    expect(await run).toMatchObject({ succeeded: 1, endedBy: 'stopped' });
  });

  it('refuses misspelt or out-of-range options with a ValidationError, running nothing', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('checked', {});
    const queues = { checked: async () => {} };
    await expect(lh.runUntilIdle({ queues, maxJob: 1 } as never)).rejects.toThrow(/did you mean maxJobs/);
    await expect(lh.runUntilIdle({ queues, maxMs: 0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(lh.runUntilIdle({ queues, concurrency: 0 })).rejects.toThrow(/concurrency/);
    await expect(lh.runUntilIdle({} as never)).rejects.toBeInstanceOf(ValidationError);
    await expect(lh.worker({ queues }).runUntilIdle({ maxJobs: -1 })).rejects.toThrow(/maxJobs/);
    expect(await lh.getJob(id)).toMatchObject({ status: 'pending', attemptCount: 0 });
  });
});
