import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/index.js';
import { expireLease, migratedClient, testPool } from '../support/db.js';
import { claimableSince } from '../support/job-states.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

describe('lh.stats()', () => {
  it('reports per-queue gauges, lost fences and recent transitions that match the transitions made', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    // mail: 4 pending (one scheduled an hour ahead), then 1 claimed and completed, 1 running with a
    // short lease, 1 retried, 1 dead.
    await lh.enqueueMany('mail', [
      { payload: { n: 1 }, priority: 5 },
      { payload: { n: 2 } },
      { payload: { n: 3 } },
      { payload: { n: 4 } },
      { payload: { n: 5 } },
      { payload: { n: 6 } },
      { payload: { n: 7 }, delayMs: 3_600_000 },
    ]);
    await lh.enqueue('empty-but-paused', {});
    await lh.pauseQueue('empty-but-paused');
    // Age the claimable jobs in database time: the oldest became claimable ten minutes ago.
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET available_at = now() - interval '10 minutes' WHERE payload->>'n' = '4'`,
    );
    const [first] = await lh.claim({ queue: 'mail', owner: 'w1' }); // n=1 (priority 5)
    expect(await lh.complete(first!)).toBe(true);
    const [second] = await lh.claim({ queue: 'mail', owner: 'w1' }); // n=4 (oldest)
    expect(await lh.fail(second!, new Error('try later'), { code: 'SMTP_421' })).toBe('retry');
    const [third] = await lh.claim({ queue: 'mail', owner: 'w1', leaseMs: 60_000 });
    expect(await lh.fail(third!, new Error('no such user'), { code: 'SMTP_550', retryable: false })).toBe(
      'dead',
    );
    const [fourth] = await lh.claim({ queue: 'mail', owner: 'w1', leaseMs: 5_000 });
    // A stale completion: the lease lapses, is recovered, and the late completion is refused.
    await expireLease(pool, lh.schema, fourth!.jobId);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    expect(await lh.complete(fourth!)).toBe(false);
    const [running] = await lh.claim({ queue: 'mail', owner: 'w2', leaseMs: 10_000 });
    expect(running).toBeDefined();

    const stats = await lh.stats({ expiringWithinMs: 20_000 });
    expect(stats.at).toBeInstanceOf(Date);
    const mail = stats.queues.find((q) => q.queue === 'mail');
    expect(mail).toMatchObject({
      pending: 4, // n=4 (retried), n=5 or n=6 and the recovered one, n=7 scheduled
      capped: false,
      running: 1,
      leasesExpiringSoon: 1,
      dead: 1,
      paused: false,
      completedInWindow: 1,
    });
    // n=4 is pending again with no backoff: claimable since its retry, a moment ago, but another
    // pending job (n=5/n=6) has waited since enqueue; the oldest is at most a few seconds old now.
    expect(mail?.oldestClaimableAgeMs).toBeGreaterThanOrEqual(0);
    expect(mail?.oldestClaimableAgeMs).toBeLessThan(60_000);
    expect(mail?.oldestDeadAgeMs).toBeGreaterThanOrEqual(0);
    expect(stats.queues.find((q) => q.queue === 'empty-but-paused')).toMatchObject({
      pending: 1,
      paused: true,
    });
    expect(stats.refusals).toEqual([{ queue: 'mail', operation: 'complete', count: 1 }]);
    expect(stats.transitions).toEqual([
      { queue: 'mail', kind: 'dead', errorCode: 'SMTP_550', count: 1 },
      { queue: 'mail', kind: 'lease_expired', errorCode: 'LEASE_EXPIRED', count: 1 },
      { queue: 'mail', kind: 'retried', errorCode: 'SMTP_421', count: 1 },
    ]);
    expect(stats.windowTruncated).toBe(false);
  });

  it('reports the age of the oldest claimable job across priorities, ignoring scheduled ones', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueue('ages', { n: 1 }, { priority: 10 });
    await lh.enqueue('ages', { n: 2 }, { priority: -3 });
    await lh.enqueue('ages', { n: 3 }, { priority: 0, delayMs: 3_600_000 });
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET available_at = now() - interval '90 seconds' WHERE payload->>'n' = '2'`,
    );
    const [ages] = (await lh.stats()).queues;
    expect(ages?.oldestClaimableAgeMs).toBeGreaterThanOrEqual(90_000);
    expect(ages?.oldestClaimableAgeMs).toBeLessThan(100_000);

    await claimableSince(pool, lh.schema, -3_600_000);
    const [later] = (await lh.stats()).queues;
    expect(later).toMatchObject({ pending: 3, oldestClaimableAgeMs: null });
  });

  it('stops counting at the cap and says so, and bounds the event window', async () => {
    const lh = await migratedClient();
    await lh.enqueueMany(
      'big',
      Array.from({ length: 5 }, (_, i) => ({ payload: { i } })),
    );
    const [big] = (await lh.stats({ countCap: 3 })).queues;
    expect(big).toMatchObject({ pending: 3, capped: true });
    for (const lease of await lh.claim({ queue: 'big', owner: 'w', limit: 3 })) {
      await lh.fail(lease, new Error('again'), { code: 'AGAIN' });
    }
    const stats = await lh.stats({ maxWindowRows: 2 });
    expect(stats.windowTruncated).toBe(true);
    expect(stats.transitions).toEqual([{ queue: 'big', kind: 'retried', errorCode: 'AGAIN', count: 2 }]);
  });

  it('rejects unknown or out-of-range options', async () => {
    const lh = await migratedClient();
    await expect(lh.stats({ countCap: 0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(lh.stats({ windowMS: 5 } as never)).rejects.toBeInstanceOf(ValidationError);
  });
});
