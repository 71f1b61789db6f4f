import { describe, expect, it } from 'vitest';
import type { JobEvent } from '../../src/index.js';
import { snoozeJobs } from '../../src/storage/leases/fail.js';
import { countByStatus, expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { deferred, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

// The parts of an entry a reader cares about, without timestamps.
const brief = (e: JobEvent) => [e.kind, e.attempt, e.owner, e.statusAfter];

describe('job history', () => {
  it('a lease handed back and claimed again within one millisecond reads in order', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const { id } = await lh.enqueue('same-ms', {});
    const [first] = await lh.claim({ queue: 'same-ms', owner: 'w' });
    expect(await snoozeJobs(lh.pool, lh.schema, [{ ...first!, delayMs: 0, handBack: 'unstarted' }])).toEqual(
      new Set([id]),
    );
    const [second] = await lh.claim({ queue: 'same-ms', owner: 'w' });
    expect(await lh.complete(second!)).toBe(true);
    // The hand-back and the second claim within one millisecond, as a worker does it: a Date holds
    // no microseconds, so only the tokens can order them.
    const s = `"${lh.schema}"`;
    await pool.query(
      `UPDATE ${s}.job_events SET at = '2026-01-01 00:00:00.000300+00',
                        claimed_at = '2026-01-01 00:00:00.000100+00' WHERE job_id = $1`,
      [id],
    );
    await pool.query(
      `UPDATE ${s}.finished_jobs SET created_at = '2026-01-01 00:00:00+00',
         claimed_at = '2026-01-01 00:00:00.000600+00', finished_at = '2026-01-01 00:00:01+00' WHERE id = $1`,
      [id],
    );
    const job = await lh.getJob(id, { history: true });
    expect(job?.history.map((e) => [e.kind, e.token])).toEqual([
      ['enqueued', null],
      ['claimed', first!.token],
      ['skipped', first!.token],
      ['claimed', second!.token],
      ['completed', second!.token],
    ]);
  });

  it('a job that was claimed, expired, recovered, retried and succeeded reads correctly in order', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const { id } = await lh.enqueue('audit', { card: 'secret-4111' }, { maxAttempts: 5 });

    const [a] = await lh.claim({ queue: 'audit', owner: 'A' });
    expect(await lh.heartbeat(a!)).toBe(true);
    expect(await lh.heartbeat(a!)).toBe(true);
    await expireLease(pool, lh.schema, id);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });

    const [b] = await lh.claim({ queue: 'audit', owner: 'B' });
    const timeout = Object.assign(new Error('downstream timed out'), { code: 'ETIMEDOUT' });
    expect(await lh.fail(b!, timeout, { delayMs: 0 })).toBe('retry');

    const [c] = await lh.claim({ queue: 'audit', owner: 'C' });
    expect(await lh.heartbeat(c!)).toBe(true);
    // A wakes up and tries to report: refused, and recorded as such.
    expect(await lh.complete(a!)).toBe(false);
    expect(await lh.complete(c!)).toBe(true);

    const job = await lh.getJob(id, { history: true });
    expect(job?.status).toBe('succeeded');
    const history = job!.history;
    expect(history.map(brief)).toEqual([
      ['enqueued', null, null, 'pending'],
      ['claimed', 1, 'A', 'running'],
      ['lease_expired', 1, 'A', 'pending'],
      ['claimed', 2, 'B', 'running'],
      ['retried', 2, 'B', 'pending'],
      ['claimed', 3, 'C', 'running'],
      ['refused', null, 'A', null],
      ['completed', 3, 'C', 'succeeded'],
    ]);
    const [enqueued, claimA, expired, claimB, retried, claimC, refused, completed] = history;
    // Tokens: every claim's own; the refusal names the stale token it presented.
    expect([claimA!.token, claimB!.token, claimC!.token]).toEqual([a!.token, b!.token, c!.token]);
    expect(expired).toMatchObject({ token: a!.token, leaseExtensions: 2, errorCode: 'LEASE_EXPIRED' });
    expect(retried).toMatchObject({
      token: b!.token,
      errorCode: 'ETIMEDOUT',
      errorClass: 'Error',
      message: 'downstream timed out',
      delayMs: 0,
      leaseExtensions: 0,
    });
    expect(refused).toMatchObject({ kind: 'refused', token: a!.token, operation: 'complete' });
    expect(completed).toMatchObject({ token: c!.token, leaseExtensions: 1 });
    // In time order, each claim before its outcome.
    const times = history.map((e) => e.at.getTime());
    expect([...times].sort((x, y) => x - y)).toEqual(times);
    expect(enqueued!.at.getTime()).toBe(job!.createdAt.getTime());
    // The per-queue counter still counts the refusal.
    expect((await lh.leaseRefusals()).map((r) => [r.operation, r.count])).toEqual([['complete', 1]]);
    // Nothing of the payload is copied into the trail.
    const trail = await pool.query(`SELECT row_to_json(e)::text AS t FROM "${lh.schema}".job_events e`);
    expect(trail.rows.length).toBeGreaterThan(0);
    for (const row of trail.rows) expect(row.t).not.toContain('secret-4111');
  });

  it('records dead endings, snoozes and refused heartbeats with who and which token', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const { id } = await lh.enqueue('endings', {}, { maxAttempts: 2 });
    const [first] = await lh.claim({ queue: 'endings', owner: 'w1' });
    // A snooze gives the attempt back.
    const { snoozeJobs } = await import('../../src/storage/leases/fail.js');
    expect((await snoozeJobs(lh.pool, lh.schema, [{ ...first!, delayMs: 0 }])).size).toBe(1);
    const [second] = await lh.claim({ queue: 'endings', owner: 'w2' });
    expect(second!.attempt).toBe(1);
    await expireLease(pool, lh.schema, id);
    expect(await lh.heartbeat(second!)).toBe(false);
    await lh.recoverExpired();
    const [third] = await lh.claim({ queue: 'endings', owner: 'w3' });
    expect(await lh.fail(third!, new Error('bad input'), { retryable: false, code: 'INVALID' })).toBe('dead');

    const job = await lh.getJob(id, { history: true });
    expect(job!.history.map(brief)).toEqual([
      ['enqueued', null, null, 'pending'],
      ['claimed', 1, 'w1', 'running'],
      ['snoozed', 1, 'w1', 'pending'],
      ['claimed', 1, 'w2', 'running'],
      ['refused', null, 'w2', null],
      ['lease_expired', 1, 'w2', 'pending'],
      ['claimed', 2, 'w3', 'running'],
      ['dead', 2, 'w3', 'dead'],
    ]);
    expect(job!.history[4]).toMatchObject({ operation: 'heartbeat', token: second!.token });
    expect(job!.history[7]).toMatchObject({ errorCode: 'INVALID', message: 'bad input' });
  });

  it('a worker records the lease extensions of the successful attempt on its finished record', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('worked', {});
    const worker = lh.worker({
      queues: {
        worked: {
          leaseMs: 300,
          handler: async (job) => {
            // Long enough for at least two renewals, each earned by progress.
            const until = performance.now() + 400;
            while (performance.now() < until) {
              await job.progress();
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
          },
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'done' });
    const job = await lh.getJob(id, { history: true });
    const completed = job!.history.at(-1);
    expect(completed?.kind).toBe('completed');
    expect(completed?.leaseExtensions).toBeGreaterThanOrEqual(2);
    expect(completed?.owner).toBe(worker.owner);
  });

  it('a worker that stops with prefetched jobs hands them back as skipped, attempt refunded', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { ids } = await lh.enqueueMany(
      'buffered',
      Array.from({ length: 6 }, (_, i) => ({ payload: i })),
    );
    const gate = deferred();
    const entered = deferred();
    const worker = lh.worker({
      queues: {
        buffered: {
          concurrency: 1,
          prefetch: 5,
          handler: () => {
            entered.resolve();
            return gate.promise;
          },
        },
      },
      shutdownTimeoutMs: 5000,
    });
    await started(worker);
    await waitFor(async () => (await countByStatus(pool, lh.schema)).running === 6, { what: '6 leases' });
    // Six leases can be held before the first handler has begun: stop only once it has, so exactly
    // the five prefetched jobs are the unstarted ones.
    await entered.promise;
    const stopping = worker.stop();
    gate.resolve();
    await stopping;
    const histories = await Promise.all(ids.map((id) => lh.getJob(id, { history: true })));
    const skipped = histories.filter((job) => job?.history.at(-1)?.kind === 'skipped');
    expect(skipped).toHaveLength(5);
    for (const job of skipped) {
      expect(job!.history.at(-1)).toMatchObject({ reason: 'unstarted', attempt: 1, statusAfter: 'pending' });
      expect(job!.attemptCount).toBe(0);
    }
  });

  it('getJob without history keeps the Job shape, and with history returns null for an unknown id', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('shape', { a: 1 });
    const job = await lh.getJob(id);
    expect(job).not.toHaveProperty('history');
    expect(await lh.getJob('987654321', { history: true })).toBeNull();
    const withHistory = await lh.getJob(id, { history: true });
    expect(withHistory?.history.map((e) => e.kind)).toEqual(['enqueued']);
  });
});
