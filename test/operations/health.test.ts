import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/index.js';
import { migratedClient, testPool, uniqueSchema, waitFor } from '../support/db.js';
import { claimableSince } from '../support/job-states.js';

describe('lh.checkHealth()', () => {
  it('passes with no rules and on an empty schema', async () => {
    const lh = await migratedClient();
    expect(await lh.checkHealth()).toEqual({ ok: true, failures: [] });
    expect(await lh.checkHealth({ maxOldestAgeMs: 0, maxDead: 0, maxLeasesExpiringSoon: 0 })).toEqual({
      ok: true,
      failures: [],
    });
  });

  it('flags old work: a claimable job older than the limit, per queue', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueue('stuck', {});
    await lh.enqueue('fresh', {});
    await claimableSince(pool, lh.schema, 600_000, { queue: 'stuck' });
    const report = await lh.checkHealth({ maxOldestAgeMs: 5 * 60_000 });
    expect(report.ok).toBe(false);
    expect(report.failures).toHaveLength(1);
    expect(report.failures[0]).toMatchObject({ rule: 'maxOldestAgeMs' });
    expect(report.failures[0]?.message).toMatch(
      /^queue stuck: oldest claimable job has waited 10m \ds \(limit 5m 0s\)$/,
    );
    expect(await lh.checkHealth({ maxOldestAgeMs: 20 * 60_000 })).toMatchObject({ ok: true });
    expect(await lh.checkHealth({ maxOldestAgeMs: 5 * 60_000, queues: ['fresh'] })).toMatchObject({
      ok: true,
    });
  });

  it('flags dead jobs above the limit, old dead jobs, and leases about to expire', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueue('mail', {});
    await lh.enqueue('mail', {});
    const [doomed] = await lh.claim({ queue: 'mail', owner: 'w' });
    await lh.fail(doomed!, new Error('bounced'), { code: 'BOUNCE', retryable: false });
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET finished_at = now() - interval '2 hours' WHERE status = 'dead'`,
    );
    await lh.claim({ queue: 'mail', owner: 'w', leaseMs: 10_000 });

    const failing = await lh.checkHealth({
      maxDead: 0,
      maxOldestDeadAgeMs: 3_600_000,
      maxLeasesExpiringSoon: 0,
    });
    expect(failing.ok).toBe(false);
    expect(failing.failures.map((f) => f.rule)).toEqual([
      'maxDead',
      'maxOldestDeadAgeMs',
      'maxLeasesExpiringSoon',
    ]);
    expect(failing.failures[0]?.message).toBe('queue mail: 1 dead jobs (limit 0)');
    expect(failing.failures[1]?.message).toMatch(
      /^queue mail: oldest dead job died 2h 0m ago \(limit 1h 0m\)$/,
    );
    expect(failing.failures[2]?.message).toBe('queue mail: 1 leases expire within 30 s (limit 0)');

    const passing = await lh.checkHealth({
      maxDead: 1,
      maxOldestDeadAgeMs: 3 * 3_600_000,
      maxLeasesExpiringSoon: 1,
    });
    expect(passing).toEqual({ ok: true, failures: [] });
  });

  it('flags a transaction held open past the limit, which holds back cleanup', async () => {
    const lh = await migratedClient();
    const holder = await testPool(1).connect();
    try {
      expect(await lh.checkHealth({ maxOldTransactionMs: 3_600_000 })).toMatchObject({ ok: true });
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT 1');
      const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
      // Poll until our transaction is older than the limit (the oldest may be another test's).
      const report = await waitFor(
        async () => {
          const r = await lh.checkHealth({ maxOldTransactionMs: 50 });
          return r.ok ? null : r;
        },
        { what: 'the old transaction to be flagged' },
      );
      expect(report.failures).toHaveLength(1);
      expect(report.failures[0]?.rule).toBe('maxOldTransactionMs');
      expect(report.failures[0]?.message).toMatch(
        /^a transaction has been open \d+(ms|s) \(pid \d+.*\), holding back cleanup/,
      );
      expect(pid).toBeGreaterThan(0);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
  });

  it('flags a jobs table whose dead tuples exceed the ratio', async () => {
    // A schema of its own, never used: the statistics this reads are cumulative per table, and an
    // emptied schema handed on by an earlier test (support/schema-pool.ts) has a past in them.
    const lh = await migratedClient({ schema: uniqueSchema() });
    expect(await lh.checkHealth({ maxDeadTupleRatio: 0.5 })).toMatchObject({ ok: true });
    const { ids } = await lh.enqueueMany(
      'churn',
      Array.from({ length: 200 }, (_, i) => ({ payload: { i } })),
    );
    expect(ids).toHaveLength(200);
    // Completed jobs leave the jobs table: each claim and completion leaves a dead tuple behind.
    const leases = await lh.claim({ queue: 'churn', owner: 'w', limit: 200 });
    expect((await lh.completeMany(leases)).size).toBe(200);
    // The statistics collector publishes a backend's counts shortly after its transactions end.
    const report = await waitFor(
      async () => {
        const r = await lh.checkHealth({ maxDeadTupleRatio: 0.5 });
        return r.ok ? null : r;
      },
      { timeoutMs: 25_000, intervalMs: 200, what: 'dead tuples to show in pg_stat_user_tables' },
    );
    expect(report.failures[0]?.rule).toBe('maxDeadTupleRatio');
    expect(report.failures[0]?.message).toMatch(/^jobs table: \d+% dead tuples \(\d+ of \d+; limit 50%\)$/);
  }, 40_000);

  it('rejects unknown rules and negative limits', async () => {
    const lh = await migratedClient();
    await expect(lh.checkHealth({ maxDaed: 1 } as never)).rejects.toBeInstanceOf(ValidationError);
    await expect(lh.checkHealth({ maxDead: -1 })).rejects.toBeInstanceOf(ValidationError);
  });
});
