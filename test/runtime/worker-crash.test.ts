import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Leasehold } from '../../src/index.js';
import { countByStatus, databaseUrl, migratedClient, testPool, waitFor } from '../support/db.js';
import { forkWorker, killHard, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

describe('crashes and lost heartbeats', () => {
  it('a worker killed with SIGKILL mid-batch loses nothing: its leases expire and another worker finishes every job', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    await lh.enqueueMany(
      'batch',
      Array.from({ length: 200 }, (_, i) => ({ payload: i })),
    );
    const victim = await forkWorker({
      schema: lh.schema,
      queue: 'batch',
      mode: 'slow',
      sleepMs: 30,
      concurrency: 8,
      leaseMs: 800,
      owner: 'victim',
    });
    await waitFor(() => victim.messages.filter((m) => m.type === 'done').length >= 40, { what: '40 done' });
    // Kill it as a handler starts (it then sleeps 30 ms), so it surely dies holding that lease,
    // not at an instant when every job of its batch is between its handler and its completion.
    const seen = victim.messages.length;
    await waitFor(() => victim.messages.slice(seen).some((m) => m.type === 'begin'), {
      what: 'a handler starting',
    });
    await killHard(victim.child);
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE lease_owner = 'victim'`,
    );
    expect(rows[0].n).toBeGreaterThan(0); // it died holding leases

    const survivor = lh.worker({
      owner: 'survivor',
      queues: { batch: { concurrency: 8, handler: async () => {} } },
      recoveryIntervalMs: 100,
      pollIntervalMs: 50,
    });
    await started(survivor);
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 200, {
      timeoutMs: 20_000,
      what: 'all 200 succeeded',
    });
    expect(await countByStatus(pool, lh.schema)).toEqual({ succeeded: 200 });
    const attempts = await pool.query(
      `SELECT max(attempt_count)::int AS most, count(*) FILTER (WHERE attempt_count = 2)::int AS retried
       FROM "${lh.schema}".finished_jobs`,
    );
    expect(attempts.rows[0].most).toBe(2);
    expect(attempts.rows[0].retried).toBe(rows[0].n);
  });

  it('after a crash between the side effect and the completion, the retry carries the same idempotency key', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    await pool.query(
      `CREATE TABLE "${lh.schema}".downstream_calls (idempotency_key text NOT NULL, job_id bigint NOT NULL, caller text NOT NULL)`,
    );
    const { id } = await lh.enqueue('payments', { amount: 42 });
    const crashing = await forkWorker({
      schema: lh.schema,
      queue: 'payments',
      mode: 'effect-then-hang',
      leaseMs: 600,
      owner: 'crashing',
    });
    await waitFor(() => crashing.messages.some((m) => m.type === 'effect'), { what: 'the side effect' });
    await killHard(crashing.child);

    const worker = lh.worker({
      queues: {
        payments: async (job) => {
          // The fake downstream deduplicates by key, as a payment API with idempotency keys does.
          await pool.query(
            `INSERT INTO "${lh.schema}".downstream_calls (idempotency_key, job_id, caller) VALUES ($1, $2, 'survivor')`,
            [job.idempotencyKey, job.id],
          );
        },
      },
      recoveryIntervalMs: 100,
      pollIntervalMs: 50,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'retry succeeded' });
    const calls = await pool.query(
      `SELECT caller, idempotency_key FROM "${lh.schema}".downstream_calls ORDER BY caller`,
    );
    expect(calls.rows.map((r) => r.caller)).toEqual(['child', 'survivor']);
    // Two calls, one logical effect: both carried the same key.
    expect(new Set(calls.rows.map((r) => r.idempotency_key)).size).toBe(1);
    expect((await lh.getJob(id))?.attemptCount).toBe(2);
  });

  it('when heartbeats are lost during active work, two executions of a job overlap for no longer than the lease plus the sweep interval', async () => {
    const setup = await migratedClient({ backoff: noBackoff });
    // Long enough that timer delays on a loaded machine stay well inside the safety margin.
    const leaseMs = 1500;
    const sweepMs = 100;
    const jobs = 10;
    await setup.enqueueMany(
      'ledger',
      Array.from({ length: jobs }, (_, i) => ({ payload: i })),
    );

    // Worker A's renewals never reach the database (its network drops them); everything else does.
    class RenewalDroppingPool extends pg.Pool {
      override query(config: unknown, values?: unknown): never {
        // Named, or unnamed behind a pooler with the name in a leading comment.
        const { name, text } = (config ?? {}) as { name?: string; text?: string };
        if ((name ?? text ?? '').includes('extend_lease')) {
          return Promise.reject(new Error('injected fault: heartbeat lost')) as never;
        }
        return (super.query as (c: unknown, v?: unknown) => never)(config, values);
      }
    }
    const lossyPool = new RenewalDroppingPool({ connectionString: databaseUrl(), max: 4 });
    const lossy = new Leasehold({ pool: lossyPool, schema: setup.schema, backoff: noBackoff });

    const ledger: { id: string; worker: string; start: number; end: number }[] = [];
    const handlerFor =
      (name: string, workMs: number) =>
      async (job: { id: string; signal: AbortSignal; progress(): Promise<boolean> }) => {
        const entry = { id: job.id, worker: name, start: performance.now(), end: Number.NaN };
        ledger.push(entry);
        try {
          // Long work with steady progress: only a lost lease stops it.
          while (!job.signal.aborted && performance.now() - entry.start < workMs) {
            await job.progress();
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        } finally {
          entry.end = performance.now();
        }
        if (job.signal.aborted) throw job.signal.reason;
      };
    const a = lossy.worker({
      owner: 'A',
      queues: { ledger: { leaseMs, concurrency: jobs, handler: handlerFor('A', 3 * leaseMs) } },
      recoveryIntervalMs: 0,
      listen: false,
      pollIntervalMs: 20,
    });
    try {
      await started(a);
      await waitFor(() => ledger.length === jobs, { what: 'A running every job' });
      // A claims nothing more, but its handlers keep running while B starts up beside it.
      const aStopping = a.stop();
      const b = setup.worker({
        owner: 'B',
        queues: { ledger: { leaseMs, concurrency: jobs, handler: handlerFor('B', 200) } },
        recoveryIntervalMs: sweepMs,
        pollIntervalMs: 20,
      });
      await started(b);
      await waitFor(() => ledger.filter((e) => e.worker === 'B' && !Number.isNaN(e.end)).length === jobs, {
        timeoutMs: 20_000,
        what: 'B finishing every job',
      });
      await aStopping;
    } finally {
      await a.stop();
      await lossyPool.end();
    }
    let longestOverlap = Number.NEGATIVE_INFINITY;
    for (const first of ledger.filter((e) => e.worker === 'A')) {
      const second = ledger.find((e) => e.worker === 'B' && e.id === first.id);
      expect(second).toBeDefined();
      longestOverlap = Math.max(longestOverlap, first.end - (second?.start ?? 0));
    }
    // The promise: overlap never longer than the lease plus the sweep interval. Here A's signal
    // fires before its lease can lapse in the database, so B's run does not overlap A's at all.
    expect(longestOverlap).toBeLessThan(leaseMs + sweepMs);
    expect(longestOverlap).toBeLessThanOrEqual(0);
    // Every A run ended through its aborted signal, well before it could have finished its work.
    for (const run of ledger.filter((e) => e.worker === 'A'))
      expect(run.end - run.start).toBeLessThan(leaseMs);
  });
});
