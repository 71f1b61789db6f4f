import { describe, expect, it } from 'vitest';
import { countByStatus, migratedClient, testPool } from '../support/db.js';
import { expireLeases } from '../support/job-states.js';

describe('failures and retries', () => {
  it('a job that keeps failing ends dead after max_attempts, with its last error, and stays in the table', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const { id } = await lh.enqueue('flaky', { secret: 'do-not-store' }, { maxAttempts: 3 });
    const outcomes: string[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      const [lease] = await lh.claim({ queue: 'flaky', owner: 'w' });
      expect(lease?.attempt).toBe(attempt);
      const error = Object.assign(new Error(`downstream timed out on attempt ${attempt}`), {
        code: 'ETIMEDOUT',
      });
      outcomes.push(await lh.fail(lease!, error));
    }
    expect(outcomes).toEqual(['retry', 'retry', 'dead']);
    expect(await lh.claim({ queue: 'flaky', owner: 'w' })).toEqual([]);
    const job = await lh.getJob(id);
    expect(job).toMatchObject({
      status: 'dead',
      attemptCount: 3,
      lastErrorCode: 'ETIMEDOUT',
      lastErrorClass: 'Error',
      lastErrorMessage: 'downstream timed out on attempt 3',
      leaseOwner: null,
      leaseExpiresAt: null,
    });
    expect(job?.finishedAt).toBeInstanceOf(Date);
    expect(job?.payload).toEqual({ secret: 'do-not-store' });
  });

  it('a retry waits out its backoff in database time before it can be claimed again', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 60_000, maxMs: 60_000 } });
    const pool = testPool();
    const { id } = await lh.enqueue('backoff', {});
    const [lease] = await lh.claim({ queue: 'backoff', owner: 'w' });
    expect(await lh.fail(lease!, new Error('boom'), { delayMs: 30_000 })).toBe('retry');
    const { rows } = await pool.query(
      `SELECT available_at BETWEEN now() + interval '29 seconds' AND now() + interval '31 seconds' AS delayed
       FROM "${lh.schema}".jobs WHERE id = $1`,
      [id],
    );
    expect(rows[0].delayed).toBe(true);
    expect(await lh.claim({ queue: 'backoff', owner: 'w' })).toEqual([]);
  });

  it('jittered backoff stays within base * 2^(attempt-1), capped at maxMs', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 10_000, maxMs: 25_000 } });
    const pool = testPool();
    const { ids } = await lh.enqueueMany(
      'jitter',
      Array.from({ length: 40 }, () => ({ payload: {}, maxAttempts: 10 })),
    );
    // Bring every job to its third attempt so the uncapped delay would be 40 s.
    await pool.query(`UPDATE "${lh.schema}".jobs SET attempt_count = 2`);
    const leases = await lh.claim({ queue: 'jitter', owner: 'w', limit: 40 });
    for (const lease of leases) expect(await lh.fail(lease, new Error('x'))).toBe('retry');
    const { rows } = await pool.query(
      `SELECT extract(epoch FROM (available_at - now())) * 1000 AS delay_ms FROM "${lh.schema}".jobs WHERE id = ANY($1)`,
      [ids],
    );
    const delays = rows.map((r) => Number(r.delay_ms));
    expect(Math.max(...delays)).toBeLessThanOrEqual(25_000);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(-1000);
    // Full jitter spreads the delays out instead of bunching them at the cap.
    expect(new Set(delays.map((d) => Math.round(d / 1000))).size).toBeGreaterThan(5);
  });

  it('a failure marked not retryable goes dead at once', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('fatal', {}, { maxAttempts: 5 });
    const [lease] = await lh.claim({ queue: 'fatal', owner: 'w' });
    expect(
      await lh.fail(lease!, new Error('bad payload'), { retryable: false, code: 'INVALID_PAYLOAD' }),
    ).toBe('dead');
    expect(await lh.getJob(id)).toMatchObject({
      status: 'dead',
      attemptCount: 1,
      lastErrorCode: 'INVALID_PAYLOAD',
    });
  });

  it('an attempt budget smaller than max_attempts ends retries early', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    await lh.enqueue('budget', {}, { maxAttempts: 8 });
    const results: string[] = [];
    for (;;) {
      const [lease] = await lh.claim({ queue: 'budget', owner: 'w' });
      if (!lease) break;
      results.push(await lh.fail(lease, 'a thrown string', { attemptBudget: 2 }));
    }
    expect(results).toEqual(['retry', 'dead']);
  });

  it('bounds stored error text and reduces codes to safe characters', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('bounded', {});
    const [lease] = await lh.claim({ queue: 'bounded', owner: 'w' });
    const huge = Object.assign(new Error('x'.repeat(50_000)), { code: "DROP TABLE jobs; --'" });
    await lh.fail(lease!, huge, { retryable: false });
    const job = await lh.getJob(id);
    expect(job?.lastErrorMessage?.length).toBe(1000);
    expect(job?.lastErrorStack?.length).toBeLessThanOrEqual(4000);
    expect(job?.lastErrorCode).toBe('DROP_TABLE_jobs;_--_'.replace(/;/g, '_'));
  });

  it('expired leases of jobs with no attempts left go dead, not back to pending', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueue('last-chance', {}, { maxAttempts: 1 });
    await lh.claim({ queue: 'last-chance', owner: 'gone' });
    await expireLeases(pool, lh.schema);
    expect(await lh.recoverExpired()).toEqual({ retried: 0, dead: 1 });
    expect(await countByStatus(pool, lh.schema)).toEqual({ dead: 1 });
  });
});
