import { describe, expect, it } from 'vitest';
import { DEFAULT_SUCCEEDED_RETENTION_MS } from '../../src/index.js';
import { prunePass, RetentionService } from '../../src/maintenance/retention.js';
import { tryMaintenanceLock } from '../../src/storage/upkeep/maintenance-lock.js';
import { countByStatus, migratedClient, testPool, waitFor } from '../support/db.js';
import { finishedSince } from '../support/job-states.js';
import { started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

async function killJobs(lh: Awaited<ReturnType<typeof migratedClient>>, queue: string, n: number) {
  await lh.enqueueMany(
    queue,
    Array.from({ length: n }, (_, i) => ({ payload: i, maxAttempts: 1 })),
  );
  const leases = await lh.claim({ queue, owner: 'w', limit: n });
  for (const lease of leases) await lh.fail(lease, new Error('boom'), { code: 'BOOM' });
}

describe('retention', () => {
  it('a churn of many thousands of jobs leaves finished_jobs bounded after each pruning pass', async () => {
    const lh = await migratedClient({ succeededRetentionMs: 0 });
    const pool = testPool();
    const rounds = 12;
    const perRound = 1000;
    let largest = 0;
    for (let round = 0; round < rounds; round++) {
      await lh.enqueueMany(
        'churn',
        Array.from({ length: perRound }, (_, i) => ({ payload: { round, i } })),
      );
      const leases = await lh.claim({ queue: 'churn', owner: 'w', limit: perRound });
      const { completeJobs } = await import('../../src/storage/leases/complete.js');
      expect((await completeJobs(lh.pool, lh.schema, leases)).size).toBe(perRound);
      const before = (await countByStatus(pool, lh.schema)).succeeded ?? 0;
      largest = Math.max(largest, before);
      const pruned = await lh.prune({ batchSize: 300 });
      expect(pruned.succeeded).toBe(before);
    }
    expect(largest).toBe(perRound);
    expect(await countByStatus(pool, lh.schema)).toEqual({});
  });

  it('keeps succeeded jobs for the default retention, or their queue’s own, and removes them after', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    expect(lh.succeededRetentionMs).toBe(DEFAULT_SUCCEEDED_RETENTION_MS);
    for (const queue of ['short', 'long', 'default']) {
      await lh.enqueueMany(queue, [{ payload: 1 }, { payload: 2 }]);
      for (const lease of await lh.claim({ queue, owner: 'w', limit: 2 })) await lh.complete(lease);
    }
    await lh.configureQueue('long', { succeededRetentionMs: 7 * 86_400_000 });
    await lh.configureQueue('short', { succeededRetentionMs: 60_000 });
    expect(await lh.prune()).toEqual({ succeeded: 0, terminal: 0, skipped: false });
    // Two hours later (in database time, by moving the records back).
    await pool.query(
      `UPDATE "${lh.schema}".finished_jobs SET finished_at = finished_at - interval '2 hours'`,
    );
    expect(await lh.prune({ batchSize: 1 })).toMatchObject({ succeeded: 4 });
    const { rows } = await pool.query(`SELECT queue_name FROM "${lh.schema}".finished_jobs ORDER BY 1`);
    expect(rows.map((r) => r.queue_name)).toEqual(['long', 'long']);
  });

  it('leaves dead jobs alone by default, and removes them after their queue’s dead retention, leaving a tombstone', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    await killJobs(lh, 'kept', 3);
    await killJobs(lh, 'expiring', 4);
    const { id: cancelled } = await lh.enqueue('expiring', {});
    await lh.cancel(cancelled, { reason: 'not needed' });
    await finishedSince(pool, lh.schema, 30 * 86_400_000);
    // Default: kept however old.
    expect(await lh.prune()).toMatchObject({ terminal: 0 });
    expect(await countByStatus(pool, lh.schema)).toEqual({ dead: 7, cancelled: 1 });

    await lh.configureQueue('expiring', { deadRetentionMs: 7 * 86_400_000 });
    const [victim] = (await lh.listDead({ queue: 'expiring', limit: 1 })).jobs;
    // One of them is replayed first: it is live again and stays.
    const { id: replayed } = (await lh.enqueue('expiring', {}, { maxAttempts: 1 })) as { id: string };
    const [lease] = await lh.claim({ queue: 'expiring', owner: 'w' });
    await lh.fail(lease!, new Error('x'));
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET finished_at = now() - interval '30 days' WHERE id = $1`,
      [replayed],
    );
    await lh.replay([replayed], { reason: 'fixed' });

    expect(await lh.prune({ batchSize: 2 })).toMatchObject({ terminal: 5 });
    expect(await countByStatus(pool, lh.schema)).toEqual({ dead: 3, pending: 1 });
    expect(await lh.getJob(victim!.id)).toBeNull();
    const { rows } = await pool.query(
      `SELECT kind, reason, error_code, detail FROM "${lh.schema}".job_events WHERE job_id = $1 ORDER BY id`,
      [victim!.id],
    );
    // The job's other events went with it; the tombstone says what was removed, why and when.
    expect(rows).toEqual([
      {
        kind: 'removed',
        reason: 'retention',
        error_code: 'BOOM',
        detail: expect.objectContaining({ status: 'dead', maxAttempts: 1, retentionMs: 7 * 86_400_000 }),
      },
    ]);
    const tombstones = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".job_events WHERE kind = 'removed'`,
    );
    expect(tombstones.rows[0].n).toBe(5);
  });

  it('a worker prunes on its own timer, and only one process prunes a schema at a time', async () => {
    const lh = await migratedClient({ succeededRetentionMs: 0 });
    const pool = testPool();
    await lh.enqueueMany(
      'auto',
      Array.from({ length: 500 }, (_, i) => ({ payload: i })),
    );
    const pruned: number[] = [];
    const worker = lh.worker({ queues: { auto: async () => {} }, pruneIntervalMs: 50, pollIntervalMs: 20 });
    worker.on('pruned', (result) => pruned.push(result.succeeded));
    await started(worker);
    await waitFor(async () => pruned.reduce((a, b) => a + b, 0) === 500, { what: 'all 500 pruned' });
    expect(await countByStatus(pool, lh.schema)).toEqual({});
    // The worker's own passes would take the lock too: stop it before checking the lock.
    await worker.stop();

    // While another transaction holds the retention lock, a pass is skipped.
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      expect(await tryMaintenanceLock(holder, lh.schema, 'retention')).toBe(true);
      const service = new RetentionService({
        intervalMs: 60_000,
        pool: lh.pool,
        schema: lh.schema,
        prune: (runBatch) =>
          prunePass(runBatch, lh.schema, { succeededRetentionMs: 0, batchSize: 100, limit: 1000 }),
      });
      expect(await service.runOnce()).toEqual({ succeeded: 0, terminal: 0, skipped: true });
      await holder.query('COMMIT'); // the lock ends with the transaction
      expect((await service.runOnce()).skipped).toBe(false);
    } finally {
      holder.release();
    }
  });
});

describe('retention of rate-limit windows (issue 32)', () => {
  it('removes the windows of 100,000 keys whose starts all left the window, a bounded number per pass, and keeps the live ones', async () => {
    // Each prune batch (1,000 deletes) takes 10-100 ms here, also with the xmin horizon pinned and
    // under every statistics state tried; in CI's fresh clone one batch still hit the default 30 s
    // statement timeout while three other suites wrote to the same disk. The test checks what a
    // pass removes, not the disk's speed: its statements get the test's own time (below).
    const lh = await migratedClient({ statementTimeoutMs: 110_000 });
    // The window is an hour, not a minute: in CI this test once took 83 s, and the live keys' starts
    // (a claim at its beginning, one 10 s before its passes) had left a one-minute window by the
    // last pass, which then rightly removed them. The keys' ages are in proportion.
    const pool = testPool(2);
    const s = `"${lh.schema}"`;
    await lh.configureQueue('per-user', { rateLimit: { max: 5, perMs: 3_600_000, perKey: true } });
    // A key used through the API: its window is live.
    await lh.enqueue('per-user', { u: 'live' }, { concurrencyKey: 'user-live' });
    const [lease] = await lh.claim({ queue: 'per-user', owner: 'w' });
    expect(lease).toBeDefined();
    const live = await pool.query(
      `SELECT bucket_key FROM ${s}.rate_limit_keys WHERE queue_name = 'per-user'`,
    );
    expect(live.rows).toEqual([{ bucket_key: 'user-live' }]);
    // 100,000 keys of users last seen two hours ago (the window is one hour), and a queue whose
    // limit was removed since, as the claim would have left them.
    await pool.query(
      `INSERT INTO ${s}.rate_limit_keys (queue_name, bucket_key, start_at, start_n, granted)
       SELECT 'per-user', 'user-' || g, ARRAY[now() - interval '2 hours'], ARRAY[1], 1
       FROM generate_series(1, 100000) AS g`,
    );
    await pool.query(
      `INSERT INTO ${s}.rate_limit_keys (queue_name, bucket_key, start_at, start_n, granted)
       VALUES ('unlimited-now', '', ARRAY[now()], ARRAY[1], 1)`,
    );
    // A key with one start in the window among old ones: still limiting.
    await pool.query(
      `INSERT INTO ${s}.rate_limit_keys (queue_name, bucket_key, start_at, start_n, granted)
       VALUES ('per-user', 'user-recent', ARRAY[now() - interval '5 hours', now() - interval '10 seconds'],
               ARRAY[1, 1], 1)`,
    );
    const count = async () =>
      Number((await pool.query(`SELECT count(*) AS n FROM ${s}.rate_limit_keys`)).rows[0].n);
    expect(await count()).toBe(100_003);

    // Bounded: a pass examines at most `limit` keys.
    await lh.prune({ batchSize: 1000, limit: 30_000 });
    expect(await count()).toBe(100_003 - 30_000);
    // Each later pass starts again from the first key and goes on; three more leave only the
    // windows that still limit something.
    for (let pass = 0; pass < 3; pass++) await lh.prune({ batchSize: 1000, limit: 30_000 });
    const { rows } = await pool.query(
      `SELECT queue_name, bucket_key FROM ${s}.rate_limit_keys ORDER BY queue_name, bucket_key`,
    );
    expect(rows).toEqual([
      { queue_name: 'per-user', bucket_key: 'user-live' },
      { queue_name: 'per-user', bucket_key: 'user-recent' },
    ]);
    // 100,000 rows written and four passes of 30,000 deletes: 1-3 s alone, but it ran past the
    // default 30 s once in CI while the system suite loaded the same disk (its WAL flushes).
  }, 120_000);
});
