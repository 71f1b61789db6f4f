import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { type JobContext, type Leasehold, LeaseLostError, type OutcomeResult } from '../../src/index.js';
import { expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { dueLane, putInLane, waitUntilBlockedBy } from '../support/lanes.js';
import { started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

async function withCounter(lh: Leasehold): Promise<pg.Pool> {
  const pool = testPool();
  await pool.query(`CREATE TABLE "${lh.schema}".counters (job_id bigint PRIMARY KEY, n int NOT NULL)`);
  return pool;
}

const bump = (client: pg.PoolClient, schema: string, jobId: string) =>
  client.query(
    `INSERT INTO "${schema}".counters (job_id, n) VALUES ($1, 1)
     ON CONFLICT (job_id) DO UPDATE SET n = counters.n + 1`,
    [jobId],
  );

function run(
  lh: Leasehold,
  handler: (job: JobContext) => Promise<unknown>,
  leaseMs = 3000,
  renew?: 'progress',
) {
  const outcomes: OutcomeResult[] = [];
  const worker = lh.worker({
    queues: { tx: { concurrency: 2, leaseMs, handler, ...(renew ? { renew } : {}) } },
    recoveryIntervalMs: 0,
    pollIntervalMs: 20,
    shutdownTimeoutMs: 500,
  });
  worker.on('outcome', (_job, result) => outcomes.push(result));
  return { worker, outcomes };
}

async function counters(pool: pg.Pool, schema: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ job_id: string; n: number }>(
    `SELECT job_id, n FROM "${schema}".counters`,
  );
  return Object.fromEntries(rows.map((r) => [r.job_id, r.n]));
}

describe('job.transaction', () => {
  it('commits the handler writes with the completion; the return completes nothing more', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = await withCounter(lh);
    const { id } = await lh.enqueue('tx', {});
    const { worker, outcomes } = run(lh, async (job) => {
      const value = await job.transaction((client) => bump(client, lh.schema, job.id).then(() => 'done'));
      expect(value).toBe('done');
    });
    await started(worker);
    await waitFor(() => outcomes.length === 1, { what: 'one outcome' });
    expect(outcomes).toEqual(['completed']);
    expect((await lh.getJob(id))?.status).toBe('succeeded');
    expect(await counters(pool, lh.schema)).toEqual({ [id]: 1 });
    expect(worker.counters.completed).toBe(1);
    expect(worker.counters.lost).toBe(0);
    // The handler's return did not present a second (refused) completion.
    expect(await lh.leaseRefusals()).toEqual([]);
  });

  it('a callback that throws rolls back its writes and the job fails as usual', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = await withCounter(lh);
    const { id } = await lh.enqueue('tx', {}, { maxAttempts: 1 });
    const { worker, outcomes } = run(lh, async (job) => {
      await job.transaction(async (client) => {
        await bump(client, lh.schema, job.id);
        throw new Error('boom');
      });
    });
    await started(worker);
    await waitFor(() => outcomes.length === 1, { what: 'one outcome' });
    expect(outcomes).toEqual(['dead']);
    expect((await lh.getJob(id))?.status).toBe('dead');
    expect(await counters(pool, lh.schema)).toEqual({});
  });

  it('a refused completion rolls the writes back, the outcome is lost, and the refusal is counted', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = await withCounter(lh);
    const { id } = await lh.enqueue('tx', {});
    const thrown: unknown[] = [];
    const { worker, outcomes } = run(lh, async (job) => {
      if (job.attempt > 1) return;
      try {
        await job.transaction(async (client) => {
          await bump(client, lh.schema, job.id);
          // Meanwhile the lease lapses (database time) and the sweep takes the job back.
          await expireLease(pool, lh.schema, job.id);
          await lh.recoverExpired();
        });
      } catch (err) {
        thrown.push(err);
        throw err;
      }
    });
    await started(worker);
    await waitFor(() => outcomes.includes('lost'), { what: 'the lost outcome' });
    expect(thrown[0]).toBeInstanceOf(LeaseLostError);
    expect(await counters(pool, lh.schema)).toEqual({});
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'the second attempt' });
    expect(await counters(pool, lh.schema)).toEqual({});
    const refusals = await lh.leaseRefusals();
    expect(refusals.map((r) => [r.queue, r.operation, r.count])).toEqual([['tx', 'complete', 1]]);
    const events = await pool.query(
      `SELECT kind, detail FROM "${lh.schema}".job_events WHERE job_id = $1 AND kind = 'refused'`,
      [id],
    );
    expect(events.rows).toEqual([{ kind: 'refused', detail: { operation: 'complete' } }]);
    expect(worker.counters.lost).toBe(1);
  });

  it('bounds statement_timeout and idle_in_transaction_session_timeout by the lease time left', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const seen: Record<string, string>[] = [];
    const { worker, outcomes } = run(
      lh,
      (job) =>
        job.transaction(async (client) => {
          const { rows } = await client.query(
            `SELECT current_setting('statement_timeout') AS st,
                    current_setting('idle_in_transaction_session_timeout') AS idle`,
          );
          seen.push(rows[0]);
        }),
      2000,
    );
    await lh.enqueue('tx', {});
    await started(worker);
    await waitFor(() => outcomes.length === 1, { what: 'one outcome' });
    const ms = (text: string | undefined) => {
      const match = /^(\d+)(ms|s)?$/.exec(text ?? '');
      if (!match) throw new Error(`unexpected setting ${text}`);
      return Number(match[1]) * (match[2] === 's' ? 1000 : 1);
    };
    for (const key of ['st', 'idle']) {
      expect(ms(seen[0]?.[key])).toBeGreaterThan(0);
      expect(ms(seen[0]?.[key])).toBeLessThan(2000);
    }
    // SET LOCAL: the pooled connection keeps its own settings afterwards.
    const after = await lh.pool.query(`SELECT current_setting('statement_timeout') AS st`);
    expect(after.rows[0].st).not.toBe(seen[0]?.st);
  });

  it('keeps renewing the lease while the callback runs, even when renewals are earned by progress', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const { id } = await lh.enqueue('tx', {});
    const { worker, outcomes } = run(
      lh,
      (job) =>
        job.transaction(async () => {
          const first = await pool.query(`SELECT lease_expires_at FROM "${lh.schema}".jobs WHERE id = $1`, [
            job.id,
          ]);
          await waitFor(
            async () => {
              const now = await pool.query(`SELECT lease_expires_at FROM "${lh.schema}".jobs WHERE id = $1`, [
                job.id,
              ]);
              return now.rows[0].lease_expires_at > first.rows[0].lease_expires_at;
            },
            { what: 'a renewal during the transaction', timeoutMs: 2500 },
          );
        }),
      3000,
      'progress',
    );
    await started(worker);
    await waitFor(() => outcomes.length === 1, { what: 'one outcome' });
    expect(outcomes).toEqual(['completed']);
    expect((await lh.getJob(id))?.status).toBe('succeeded');
  });

  it('refuses a second transaction once the first committed', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const codes: unknown[] = [];
    const { worker, outcomes } = run(lh, async (job) => {
      await job.transaction(() => undefined);
      await job.transaction(() => undefined).catch((err: { code?: string }) => codes.push(err.code));
    });
    await lh.enqueue('tx', {});
    await started(worker);
    await waitFor(() => outcomes.length === 1, { what: 'one outcome' });
    expect(outcomes).toEqual(['completed']);
    expect(codes).toEqual(['JOB_STATE']);
  });

  it('refuses a bad callback or adapter with a ValidationError, writing nothing, and the job still completes', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const codes: unknown[] = [];
    const note = (err: { code?: string; field?: string }) => codes.push(`${err.code}:${err.field}`);
    const { worker, outcomes } = run(lh, async (job) => {
      await job.transaction(42 as never).catch(note);
      await job.transaction(() => undefined, { with: {} } as never).catch(note);
      await job.transaction(() => undefined, { wiht: {} } as never).catch(note);
    });
    const { id } = await lh.enqueue('tx', {});
    await started(worker);
    await waitFor(() => outcomes.length === 1, { what: 'one outcome' });
    expect(codes).toEqual(['VALIDATION:fn', 'VALIDATION:options.with', 'VALIDATION:options.wiht']);
    expect(outcomes).toEqual(['completed']);
    expect((await lh.getJob(id))?.status).toBe('succeeded');
  });
});

describe('job.transaction and the lane rotation (issue 32)', () => {
  it('a completion that meets a lane move runs the callback again in a new transaction: its writes land once, the job succeeds on its first attempt', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = await withCounter(lh);
    const { id } = await lh.enqueue('tx', {});
    const due = await dueLane(pool);
    const mover = await pool.connect();
    let calls = 0;
    let moved = -1;
    let released: Promise<void> | null = null;
    const outcomes: OutcomeResult[] = [];
    const worker = lh.worker({
      queues: {
        tx: {
          concurrency: 1,
          leaseMs: 60_000,
          handler: async (job) => {
            // Where the rotation finds it: the lane due to be emptied.
            await putInLane(pool, lh.schema, [job.id], due);
            await job.transaction(async (client: pg.PoolClient) => {
              calls += 1;
              await bump(client, lh.schema, job.id);
              if (calls > 1) return;
              // The rotation's move, held open across the completion: the row is locked and moved,
              // not yet committed; it commits once the completion waits for it.
              await mover.query('BEGIN');
              const result = await mover.query(`SELECT moved FROM "${lh.schema}".move_job_lane_rows(100)`);
              moved = Number(result.rows[0].moved);
              const xid = (await mover.query('SELECT txid_current()::text AS xid')).rows[0].xid;
              released = (async () => {
                await waitUntilBlockedBy(pool, xid);
                await mover.query('COMMIT');
              })();
            });
          },
        },
      },
      recoveryIntervalMs: 0,
      laneRotationIntervalMs: 0,
      pollIntervalMs: 20,
      shutdownTimeoutMs: 500,
    });
    worker.on('outcome', (_job, result) => outcomes.push(result));
    try {
      await started(worker);
      await waitFor(() => outcomes.length >= 1, { what: 'an outcome' });
      await released;
    } finally {
      await worker.stop();
      mover.release();
    }
    expect(moved).toBe(1);
    // The first transaction (writes and completion) was rolled back by the move; the callback ran
    // again under the same lease and committed both, once.
    expect(calls).toBe(2);
    expect(outcomes).toEqual(['completed']);
    expect(await counters(pool, lh.schema)).toEqual({ [id]: 1 });
    expect(await lh.getJob(id)).toMatchObject({ status: 'succeeded', attemptCount: 1 });
    expect(worker.counters.completed).toBe(1);
    expect(await lh.leaseRefusals()).toEqual([]);
  });
});
