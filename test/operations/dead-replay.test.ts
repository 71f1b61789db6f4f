import { describe, expect, it } from 'vitest';
import { isLeaseholdError, JobNotFoundError, JobStateError, ValidationError } from '../../src/index.js';
import { loadMigrations } from '../../src/migrations/migrator.js';
import { countByStatus, migratedClient, testPool, uniqueSchema } from '../support/db.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

describe('dead jobs and replay', () => {
  it('exhausted retries end visible and dead, never deleted, and listDead pages through them newest first', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const { ids } = await lh.enqueueMany(
      'mail',
      Array.from({ length: 7 }, (_, i) => ({ payload: { i, to: `user${i}@example.com` }, maxAttempts: 2 })),
    );
    await lh.enqueue('other', {}, { maxAttempts: 1 });
    for (let round = 0; round < 2; round++) {
      const leases = await lh.claim({ queue: 'mail', owner: 'w', limit: 10 });
      for (const lease of leases) {
        const code = (lease.payload as { i: number }).i % 2 ? 'SMTP_421' : 'SMTP_550';
        await lh.fail(lease, Object.assign(new Error(`mailbox said no (${code})`), { code }));
      }
    }
    const [other] = await lh.claim({ queue: 'other', owner: 'w' });
    await lh.fail(other!, new Error('nope'), { code: 'OTHER' });
    // Seed test 6: a visible terminal state, kept, with its last error; retention leaves it by default.
    expect(await countByStatus(pool, lh.schema)).toEqual({ dead: 8 });
    expect(await lh.prune()).toMatchObject({ terminal: 0 });
    expect(await countByStatus(pool, lh.schema)).toEqual({ dead: 8 });

    const first = await lh.listDead({ queue: 'mail', limit: 3 });
    expect(first.jobs).toHaveLength(3);
    expect(first.cursor).not.toBeNull();
    expect(first.jobs[0]).toMatchObject({
      queueName: 'mail',
      attemptCount: 2,
      maxAttempts: 2,
      errorClass: 'Error',
    });
    expect(first.jobs[0]).not.toHaveProperty('payload');
    const pages = [first];
    while (pages.at(-1)!.cursor)
      pages.push(await lh.listDead({ queue: 'mail', limit: 3, cursor: pages.at(-1)!.cursor! }));
    const listed = pages.flatMap((p) => p.jobs);
    expect(listed.map((j) => j.id).sort()).toEqual([...ids].sort());
    // Newest death first.
    const died = listed.map((j) => j.diedAt.getTime());
    expect([...died].sort((a, b) => b - a)).toEqual(died);
    // Filters: error code, all queues, before.
    const only421 = await lh.listDead({ queue: 'mail', errorCode: 'SMTP_421', limit: 100 });
    expect(only421.jobs.length).toBeGreaterThan(0);
    expect(only421.jobs.every((j) => j.errorCode === 'SMTP_421')).toBe(true);
    expect((await lh.listDead({ limit: 100 })).jobs).toHaveLength(8);
    expect((await lh.listDead({ before: new Date(0) })).jobs).toEqual([]);
    await expect(lh.listDead({ cursor: 'not-a-cursor' })).rejects.toThrow(ValidationError);
  });

  it('replay keeps the id and the history, adds a replayed event and gives a fresh attempt budget', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id } = await lh.enqueue('reports', { month: 3 }, { maxAttempts: 2 });
    for (let i = 0; i < 2; i++) {
      const [lease] = await lh.claim({ queue: 'reports', owner: 'w' });
      await lh.fail(lease!, Object.assign(new Error('renderer crashed'), { code: 'RENDER' }));
    }
    expect((await lh.getJob(id))?.status).toBe('dead');
    const result = await lh.replay([id], { reason: 'renderer fixed in v2.3', actor: 'ops@example.com' });
    expect(result).toEqual({ replayed: 1, ids: [id] });
    const job = await lh.getJob(id, { history: true });
    expect(job).toMatchObject({
      id,
      status: 'pending',
      attemptCount: 0,
      maxAttempts: 2,
      payload: { month: 3 },
    });
    expect(job!.finishedAt).toBeNull();
    const kinds = job!.history.map((e) => e.kind);
    expect(kinds).toEqual(['enqueued', 'claimed', 'retried', 'claimed', 'dead', 'replayed']);
    expect(job!.history.at(-1)).toMatchObject({
      actor: 'ops@example.com',
      reason: 'renderer fixed in v2.3',
      errorCode: 'RENDER',
      statusAfter: 'pending',
      detail: { attemptsBefore: 2, resetAttempts: true },
    });
    // The fresh budget: two more attempts, and the same id is claimed.
    const [again] = await lh.claim({ queue: 'reports', owner: 'w2' });
    expect(again).toMatchObject({ jobId: id, attempt: 1 });
    expect(await lh.complete(again!)).toBe(true);
    const done = await lh.getJob(id, { history: true });
    expect(done!.history.map((e) => e.kind)).toEqual([...kinds, 'claimed', 'completed']);
  });

  it('replay without resetting attempts keeps counting and raises the budget by the same amount', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id } = await lh.enqueue('count', {}, { maxAttempts: 3 });
    const [lease] = await lh.claim({ queue: 'count', owner: 'w' });
    await lh.fail(lease!, new Error('x'), { retryable: false });
    await lh.replay([id], { reason: 'again', resetAttempts: false });
    expect(await lh.getJob(id)).toMatchObject({ status: 'pending', attemptCount: 1, maxAttempts: 4 });
    const [next] = await lh.claim({ queue: 'count', owner: 'w' });
    expect(next!.attempt).toBe(2);
  });

  it('replaying a job that is not dead is a typed error, and a mixed list writes nothing', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id: dead } = await lh.enqueue('mixed', {}, { maxAttempts: 1 });
    const [lease] = await lh.claim({ queue: 'mixed', owner: 'w' });
    await lh.fail(lease!, new Error('x'));
    const { id: pending } = await lh.enqueue('mixed', {});
    const err = await lh.replay([dead, pending], { reason: 'try' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JobStateError);
    expect(isLeaseholdError(err, 'JOB_STATE')).toBe(true);
    expect((err as JobStateError).jobs).toEqual([{ id: pending, status: 'pending' }]);
    expect((err as Error).message).toContain(`${pending} is pending`);
    // Nothing was written: the dead job is still dead, with no replay in its history.
    const still = await lh.getJob(dead, { history: true });
    expect(still?.status).toBe('dead');
    expect(still!.history.some((e) => e.kind === 'replayed')).toBe(false);
    const missing = await lh.replay([dead, '99999999'], { reason: 'try' }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(JobNotFoundError);
    expect((await lh.getJob(dead))?.status).toBe('dead');
    // A succeeded job is reported as such.
    const { id: ok } = await lh.enqueue('mixed-ok', {});
    const [okLease] = await lh.claim({ queue: 'mixed-ok', owner: 'w' });
    await lh.complete(okLease!);
    await expect(lh.replay([ok], { reason: 'try' })).rejects.toThrow(`${ok} is succeeded`);
    // Input is validated before anything is written.
    await expect(lh.replay([dead], { reason: '' })).rejects.toThrow(ValidationError);
    await expect(lh.replay(['abc'], { reason: 'x' })).rejects.toThrow(ValidationError);
    await expect(lh.replay({}, { reason: 'x' })).rejects.toThrow(/at least one of queue/);
    expect((await lh.getJob(dead))?.status).toBe('dead');
  });

  it('replays thousands of dead jobs by filter in bounded batches, reporting progress, and leaves others alone', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const total = 3000;
    await lh.enqueueMany(
      'bulk',
      Array.from({ length: total }, (_, i) => ({ payload: i, maxAttempts: 1 })),
    );
    for (;;) {
      const leases = await lh.claim({ queue: 'bulk', owner: 'w', limit: 1000 });
      if (leases.length === 0) break;
      const { failJobs } = await import('../../src/storage/leases/fail.js');
      await failJobs(
        lh.pool,
        lh.schema,
        leases.map((lease, i) => ({
          ...lease,
          retryable: false,
          delayMs: null,
          baseMs: 0,
          maxMs: 0,
          attemptBudget: null,
          errorCode: i % 3 === 0 ? 'QUOTA' : 'OTHER',
          errorClass: 'Error',
          errorMessage: 'x',
          errorStack: null,
        })),
      );
    }
    const quota = (
      await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE last_error_code = 'QUOTA'`)
    ).rows[0].n as number;
    const progress: { replayed: number; total: number }[] = [];
    const result = await lh.replay(
      { queue: 'bulk', errorCode: 'QUOTA' },
      { reason: 'quota raised', batchSize: 250, onProgress: (p) => progress.push(p) },
    );
    expect(result).toEqual({ replayed: quota });
    expect(progress.length).toBeGreaterThanOrEqual(Math.ceil(quota / 250));
    expect(progress.at(-1)).toEqual({ replayed: quota, total: quota });
    expect(progress.every((p, i) => i === 0 || p.replayed >= progress[i - 1]!.replayed)).toBe(true);
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: quota, dead: total - quota });
    const events = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".job_events WHERE kind = 'replayed' AND reason = 'quota raised'`,
    );
    expect(events.rows[0].n).toBe(quota);
  });

  it('a schema upgraded from version 1 keeps its dead jobs listable and replayable, and can cancel', async () => {
    const schema = uniqueSchema('lh_upgrade');
    const pool = testPool();
    const client = await pool.connect();
    try {
      // Version 1 as an earlier Leasehold left it, with work in it.
      await client.query('BEGIN');
      await client.query(`CREATE SCHEMA "${schema}"`);
      await client.query(`SET LOCAL search_path TO "${schema}"`);
      await client.query(loadMigrations()[0]!.sql);
      await client.query(
        `CREATE TABLE migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      await client.query(`INSERT INTO migrations (version, name) VALUES (1, 'jobs')`);
      await client.query(
        `INSERT INTO jobs (queue_name, payload, status, attempt_count, max_attempts, last_error_code, finished_at)
         VALUES ('old', '{}', 'dead', 3, 3, 'OLD_FAILURE', now()), ('old', '{}', 'pending', 0, 3, NULL, NULL)`,
      );
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const lh = await migratedClient({ schema });
    const versions = await pool.query(`SELECT version FROM "${schema}".migrations ORDER BY version`);
    expect(versions.rows.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
    const { jobs } = await lh.listDead({ queue: 'old' });
    expect(jobs).toMatchObject([{ errorCode: 'OLD_FAILURE', attemptCount: 3 }]);
    expect(await lh.replay([jobs[0]!.id], { reason: 'after the upgrade' })).toMatchObject({ replayed: 1 });
    const pending = await lh.claim({ queue: 'old', owner: 'w', limit: 2 });
    expect(pending).toHaveLength(2);
    expect(await lh.cancel(pending[0]!.jobId, { reason: 'upgrade test' })).toMatchObject({
      previousStatus: 'running',
    });
    expect((await lh.getJob(pending[0]!.jobId, { history: true }))!.history.map((e) => e.kind)).toEqual(
      expect.arrayContaining(['enqueued', 'claimed', 'cancelled']),
    );
  });
});
