import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { isLeaseholdError, Leasehold } from '../../src/index.js';
import { uniqueSchema, waitFor } from '../support/db.js';
import { startRestartablePostgres } from '../support/restartable-postgres.js';
import { deferred, forkWorker, killHard, started } from '../support/worker.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const unhandled: unknown[] = [];
const recordUnhandled = (err: unknown) => unhandled.push(err);
process.on('unhandledRejection', recordUnhandled);
afterEach(() => {
  process.off('unhandledRejection', recordUnhandled);
});

/** Rejects with a plain Error if `promise` has not settled within `ms`: a hang, not a failure. */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]);
}

describe('a PostgreSQL restart', () => {
  it('workers, the listener and maintenance come back on their own; enqueues meanwhile fail fast with a typed error; every acknowledged job finishes, and no lease outlives its expiry by more than a sweep', async () => {
    const server = await startRestartablePostgres();
    const schema = uniqueSchema('lh_restart');
    const leaseMs = 1500;
    const sweepMs = 200;
    // This server is a direct one, whatever pooler the rest of the suite runs behind.
    const lh = new Leasehold({
      connectionString: server.connectionString,
      schema,
      backoff: { baseMs: 0, maxMs: 0 },
      preparedStatements: true,
      listen: true,
    });
    const observer = new pg.Pool({ connectionString: server.connectionString, max: 2 });
    observer.on('error', () => {}); // its idle connections die with the server
    const errors: number[] = [];
    let child: Awaited<ReturnType<typeof forkWorker>>['child'] | undefined;
    try {
      await lh.migrate();
      const worker = lh.worker({
        owner: 'in-process',
        queues: {
          work: { concurrency: 8, leaseMs, renew: 'alive', handler: () => sleep(150) },
          // Only this worker runs `wake`, and it polls once a minute: a wake-up must bring jobs in.
          wake: { leaseMs, handler: async () => {} },
        },
        pollIntervalMs: 60_000,
        recoveryIntervalMs: sweepMs,
        agingPassIntervalMs: sweepMs,
        pruneIntervalMs: 500,
      });
      worker.on('error', () => errors.push(performance.now()));
      await started(worker);
      // A second worker in a process of its own, polling, without a sweep of its own.
      ({ child } = await forkWorker({
        databaseUrl: server.connectionString,
        schema,
        queue: 'work',
        mode: 'slow',
        sleepMs: 150,
        owner: 'child',
        leaseMs,
        concurrency: 4,
      }));
      const listenerBefore = await waitFor(() => worker.listenerPid, { what: 'the listener' });

      const acknowledged: string[] = [];
      const before = await lh.enqueueMany(
        'work',
        Array.from({ length: 300 }, (_, i) => ({ payload: { i } })),
      );
      acknowledged.push(...before.ids);
      await waitFor(
        async () => {
          const { rows } = await observer.query<{ done: number; running: number }>(
            `SELECT (SELECT count(*) FROM "${schema}".finished_jobs)::int AS done,
                    (SELECT count(*) FROM "${schema}".jobs WHERE status = 'running')::int AS running`,
          );
          return rows[0] && rows[0].done >= 20 && rows[0].running >= 4;
        },
        { what: 'jobs finished and jobs running' },
      );

      const crashingAt = performance.now(); // the worker may hear of it while crash() still waits
      await server.crash();
      // Enqueues while the server is down fail at once, with Leasehold's typed error.
      const attempts = await Promise.allSettled(
        Array.from({ length: 5 }, (_, i) => within(lh.enqueue('work', { outage: i }), 5000)),
      );
      for (const attempt of attempts) {
        expect(attempt.status).toBe('rejected');
        const reason = (attempt as PromiseRejectedResult).reason;
        expect(isLeaseholdError(reason, 'DATABASE'), String(reason)).toBe(true);
      }
      // Down for twice the lease: every lease held at the crash lapses meanwhile.
      await sleep(2 * leaseMs);
      const outageErrors = errors.filter((at) => at >= crashingAt).length;
      await server.start();

      // Nothing spins while the server is down: each part retries on its own timer or backoff, and
      // the outage is reported once (issue 38), not once per statement per retry.
      expect(outageErrors).toBe(1);

      // From the moment the server answers again (its own clock), no running job may stay past
      // its lease expiry by more than a sweep.
      const backAt = await waitFor(
        async () => {
          try {
            return (await observer.query<{ now: Date }>('SELECT now()')).rows[0]?.now;
          } catch {
            return undefined;
          }
        },
        { what: 'the server back' },
      );
      let worstOverdueMs = 0;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const { rows } = await observer.query<{ overdue_ms: number | null }>(
            `SELECT max(extract(epoch FROM now() - greatest(lease_expires_at, $1)) * 1000)::float8 AS overdue_ms
             FROM "${schema}".jobs WHERE status = 'running' AND lease_expires_at < now()`,
            [backAt],
          );
          worstOverdueMs = Math.max(worstOverdueMs, rows[0]?.overdue_ms ?? 0);
          await sleep(25);
        }
      })();

      const after = await lh.enqueueMany(
        'work',
        Array.from({ length: 50 }, (_, i) => ({ payload: { after: i } })),
      );
      acknowledged.push(...after.ids);
      try {
        await waitFor(
          async () => {
            const { rows } = await observer.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM "${schema}".finished_jobs WHERE id = ANY($1::bigint[])`,
              [acknowledged],
            );
            return rows[0]?.n === acknowledged.length;
          },
          { timeoutMs: 30_000, what: 'every acknowledged job finished' },
        );
      } finally {
        sampling = false;
        await sampler;
      }
      expect(worstOverdueMs).toBeLessThan(sweepMs * 1.25 + 1500); // slack for a loaded machine
      // Leases that lapsed in the outage came back through this worker's sweep.
      expect(worker.counters.recovered).toBeGreaterThan(0);
      const { rows: left } = await observer.query(`SELECT status::text FROM "${schema}".jobs`);
      expect(left).toEqual([]);

      // The listener reconnected: a job of a queue only wake-ups bring in runs at once.
      const listenerAfter = await waitFor(
        () =>
          worker.listenerPid !== null && worker.listenerPid !== listenerBefore ? worker.listenerPid : null,
        { what: 'the listener back' },
      );
      expect(listenerAfter).not.toBe(listenerBefore);
      const woken = deferred<string>();
      worker.on('outcome', (job, result) => {
        if (job.queue === 'wake' && result === 'completed') woken.resolve(job.id);
      });
      const { id } = await lh.enqueue('wake', {});
      expect(await within(woken.promise, 5000)).toBe(id);

      // Every part works again: nothing more goes wrong while the maintenance passes keep running.
      const settledAt = performance.now();
      await sleep(1000);
      expect(errors.filter((at) => at >= settledAt)).toEqual([]);
      expect(child.exitCode).toBeNull();
      expect(worker.activeCount).toBe(0);
      await worker.stop();
      expect(unhandled).toEqual([]);
    } finally {
      if (child) await killHard(child);
      await lh.close();
      await observer.end();
    }
    // A server of its own to initialise, start twice and recover: more than the default 30 s on a
    // loaded machine. Every wait inside has its own, tighter bound.
  }, 120_000);
});
