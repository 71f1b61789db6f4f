import { describe, expect, it } from 'vitest';
import { completeJobs } from '../../src/storage/leases/complete.js';
import { countByStatus, expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { expireLeases } from '../support/job-states.js';

describe('leases and fencing', () => {
  it('a job whose worker crashed after the claim committed expires, is recovered, and is reclaimed with a higher token', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool();
    const { id } = await lh.enqueue('crash', { step: 1 });
    const [first] = await lh.claim({ queue: 'crash', owner: 'crashed-worker', leaseMs: 60_000 });
    expect(first?.jobId).toBe(id);
    // The worker "crashes": it never heartbeats or completes. Its lease runs out (in database time).
    expect(await lh.recoverExpired()).toEqual({ retried: 0, dead: 0 });
    await expireLease(pool, lh.schema, id);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    const recovered = await lh.getJob(id);
    expect(recovered).toMatchObject({ status: 'pending', lastErrorCode: 'LEASE_EXPIRED', leaseOwner: null });

    const [second] = await lh.claim({ queue: 'crash', owner: 'survivor' });
    expect(second?.jobId).toBe(id);
    expect(BigInt(second?.token ?? 0)).toBeGreaterThan(BigInt(first?.token ?? 0));
    expect(second?.attempt).toBe(2);
    expect(await lh.complete(second!)).toBe(true);
    expect((await lh.getJob(id))?.status).toBe('succeeded');
  });

  it("a stale worker's complete, heartbeat and fail change nothing after another worker reclaimed and completed the job", async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool();
    const { id } = await lh.enqueue('stale', {});
    const [leaseA] = await lh.claim({ queue: 'stale', owner: 'A' });
    await expireLease(pool, lh.schema, id);
    await lh.recoverExpired();
    const [leaseB] = await lh.claim({ queue: 'stale', owner: 'B' });
    expect(await lh.complete(leaseB!)).toBe(true);
    const done = await lh.getJob(id);

    expect(await lh.complete(leaseA!)).toBe(false);
    expect(await lh.heartbeat(leaseA!)).toBe(false);
    expect(await lh.fail(leaseA!, new Error('late failure'))).toBe('lost');
    expect(await lh.getJob(id)).toEqual(done);
    // The refused writes were counted, per operation.
    const refusals = await lh.leaseRefusals();
    expect(refusals.map((r) => [r.queue, r.operation, r.count])).toEqual([
      ['stale', 'complete', 1],
      ['stale', 'fail', 1],
      ['stale', 'heartbeat', 1],
    ]);
  });

  it('refuses a stale completion while the new owner still holds the job, even with the same owner name', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool();
    const { id } = await lh.enqueue('same-owner', {});
    const [old] = await lh.claim({ queue: 'same-owner', owner: 'host:1' });
    await expireLease(pool, lh.schema, id);
    await lh.recoverExpired();
    const [current] = await lh.claim({ queue: 'same-owner', owner: 'host:1' });
    expect(await lh.complete(old!)).toBe(false);
    expect((await lh.getJob(id))?.status).toBe('running');
    expect(await lh.complete(current!)).toBe(true);
  });

  it('a completed job leaves the hot table and keeps a compact record of the accepted claim, without its payload', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue('done', { card: '4111 1111 1111 1111' }, { priority: 2 });
    const [lease] = await lh.claim({ queue: 'done', owner: 'finisher' });
    expect(await lh.complete(lease!)).toBe(true);
    const live = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".jobs`);
    expect(live.rows[0].n).toBe(0);
    const job = await lh.getJob(id);
    expect(job).toMatchObject({
      id,
      queueName: 'done',
      status: 'succeeded',
      payload: null,
      priority: 2,
      attemptCount: 1,
      leaseOwner: 'finisher',
      leaseToken: lease!.token,
    });
    expect(job?.finishedAt).toBeInstanceOf(Date);
    // A second completion of the same claim is refused: the job is no longer running.
    expect(await lh.complete(lease!)).toBe(false);
  });

  it('completeMany accepts the current leases of a batch and refuses only the stale one', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool();
    await lh.enqueueMany('many', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    const leases = await lh.claim({ queue: 'many', owner: 'w', limit: 3 });
    const stale = leases[1]!;
    await expireLease(pool, lh.schema, stale.jobId);
    await lh.recoverExpired();
    const accepted = await lh.completeMany(leases);
    expect([...accepted].sort()).toEqual([leases[0]!.jobId, leases[2]!.jobId].sort());
    expect((await lh.getJob(stale.jobId))?.status).toBe('pending');
    expect((await lh.leaseRefusals()).map((r) => [r.operation, r.count])).toEqual([['complete', 1]]);
  });

  it('refuses a completion after the lease expired in database time, before any sweep ran', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue('late', {});
    const [lease] = await lh.claim({ queue: 'late', owner: 'slow' });
    await expireLease(pool, lh.schema, id);
    expect(await lh.complete(lease!)).toBe(false);
    expect((await lh.getJob(id))?.status).toBe('running');
  });

  it('a heartbeat extends the lease in database time, so recovery leaves the job alone', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue('beat', {});
    const [lease] = await lh.claim({ queue: 'beat', owner: 'w', leaseMs: 1000 });
    const before = (await lh.getJob(id))?.leaseExpiresAt as Date;
    expect(await lh.heartbeat(lease!, { leaseMs: 120_000 })).toBe(true);
    const after = (await lh.getJob(id))?.leaseExpiresAt as Date;
    expect(after.getTime() - before.getTime()).toBeGreaterThan(100_000);
    expect(lease!.expiresAt.getTime()).toBe(after.getTime());
    const { rows } = await pool.query(
      `SELECT lease_expires_at > now() + interval '100 seconds' AS extended FROM "${lh.schema}".jobs WHERE id = $1`,
      [id],
    );
    expect(rows[0].extended).toBe(true);
    expect(await lh.recoverExpired()).toEqual({ retried: 0, dead: 0 });
    expect(await lh.complete(lease!)).toBe(true);
  });

  it('recovery moves only the lapsed lease of a batch, not the renewed or completed ones', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { ids } = await lh.enqueueMany('race', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    const leases = await lh.claim({ queue: 'race', owner: 'w', limit: 3, leaseMs: 60_000 });
    // Only the third lease lapses; the other two stay live and are renewed and completed.
    await expireLease(pool, lh.schema, ids[2]!);
    const byId = new Map(leases.map((l) => [l.jobId, l]));
    expect(await lh.heartbeat(byId.get(ids[0]!)!)).toBe(true);
    expect(await lh.complete(byId.get(ids[1]!)!)).toBe(true);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    expect(await countByStatus(pool, lh.schema)).toEqual({ running: 1, succeeded: 1, pending: 1 });
  });

  it('recovery skips a row held by a renewal in flight instead of waiting, and the renewal stands', async () => {
    const lh = await migratedClient();
    const pool = testPool(3);
    const { ids } = await lh.enqueueMany('race', [{ payload: 'renewed' }, { payload: 'lapsed' }]);
    const leases = await lh.claim({ queue: 'race', owner: 'w', limit: 2, leaseMs: 60_000 });
    const renewed = leases.find((l) => l.jobId === ids[0])!;
    await expireLease(pool, lh.schema, ids[0]!);
    await expireLease(pool, lh.schema, ids[1]!);
    // A renewal in flight: its transaction holds the row and has moved the expiry on, uncommitted,
    // so every snapshot the sweep can take still shows the lease as expired.
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        `UPDATE "${lh.schema}".jobs SET lease_expires_at = now() + interval '60 seconds' WHERE id = $1`,
        [ids[0]],
      );
      // The sweep runs while the row is held: it must pass over it (SKIP LOCKED), not wait on it,
      // and still recover the other lapsed lease.
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<'waited'>((resolve) => {
        timer = setTimeout(() => resolve('waited'), 15_000);
      });
      const swept = await Promise.race([lh.recoverExpired(), waited]);
      clearTimeout(timer);
      expect(swept, 'the sweep waited on a row held by a renewal').toEqual({ retried: 1, dead: 0 });
      await holder.query('COMMIT');
    } finally {
      holder.release();
    }
    // The renewal committed: the lease is live again, and no later sweep touches it.
    expect(await lh.recoverExpired()).toEqual({ retried: 0, dead: 0 });
    expect(await lh.getJob(ids[0]!)).toMatchObject({ status: 'running', leaseOwner: 'w' });
    expect(await lh.complete(renewed)).toBe(true);
    expect(await countByStatus(pool, lh.schema)).toEqual({ succeeded: 1, pending: 1 });
  });

  it('recovers a large set of expired leases in bounded batches, from several sweeps at once', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool();
    await lh.enqueueMany(
      'sweep',
      Array.from({ length: 2500 }, (_, i) => ({ payload: i, maxAttempts: i % 5 === 0 ? 1 : 3 })),
    );
    await lh.claim({ queue: 'sweep', owner: 'gone', limit: 1000 });
    await lh.claim({ queue: 'sweep', owner: 'gone', limit: 1000 });
    await lh.claim({ queue: 'sweep', owner: 'gone', limit: 500 });
    await expireLeases(pool, lh.schema);
    const sweeps = await Promise.all([
      lh.recoverExpired({ batchSize: 100 }),
      lh.recoverExpired({ batchSize: 100 }),
      lh.recoverExpired({ batchSize: 100 }),
    ]);
    const retried = sweeps.reduce((n, s) => n + s.retried, 0);
    const dead = sweeps.reduce((n, s) => n + s.dead, 0);
    expect({ retried, dead }).toEqual({ retried: 2000, dead: 500 });
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 2000, dead: 500 });
  });

  it('recoverExpired stops at its limit', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany(
      'limited',
      Array.from({ length: 30 }, (_, i) => ({ payload: i })),
    );
    await lh.claim({ queue: 'limited', owner: 'gone', limit: 30 });
    await expireLeases(pool, lh.schema);
    expect(await lh.recoverExpired({ limit: 12, batchSize: 5 })).toEqual({ retried: 12, dead: 0 });
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 12, running: 18 });
  });

  it('a lease whose id and token are written with leading zeros is the same lease: its writes land and say so', async () => {
    const lh = await migratedClient();
    const { id: first } = await lh.enqueue('padded', {});
    const { id: second } = await lh.enqueue('padded', {});
    const leases = await lh.claim({ queue: 'padded', owner: 'w', limit: 2 });
    const padded = leases.map((lease) => ({ ...lease, jobId: `00${lease.jobId}`, token: `0${lease.token}` }));
    const [a, b] = padded;
    expect(await lh.heartbeat(a!)).toBe(true);
    expect(a!.expiresAt.getTime()).toBeGreaterThanOrEqual(leases[0]!.expiresAt.getTime());
    expect(await lh.complete(a!)).toBe(true);
    // The same job twice in one call, once padded, is refused before anything is written.
    await expect(lh.completeMany([b!, leases[1]!])).rejects.toThrow(/two claims of job/);
    expect(await lh.completeMany([b!])).toEqual(new Set([second]));
    expect((await lh.getJob(first))?.status).toBe('succeeded');
    expect((await lh.getJob(second))?.status).toBe('succeeded');
    expect(await lh.leaseRefusals()).toEqual([]);
  });
});

describe('the fence holds against a write that commits while a completion runs', () => {
  // The fence's row lock (FOR UPDATE in fencedCte) re-checks the lease on the newest version of a
  // row that another transaction changed while the completion waited for it. Without it, the check
  // reads the statement's snapshot (the old lease, still matching) and the DELETE that follows,
  // which waits and then re-checks only its own condition, removes a job someone else now holds.
  it.each([
    ['the whole completion', false],
    ['the plain completion', true],
  ])('%s, blocked behind a re-claim that then commits, changes nothing and is refused', async (_, plain) => {
    const lh = await migratedClient();
    const pool = testPool(3);
    const { id } = await lh.enqueue('raced', {});
    const [lease] = await lh.claim({ queue: 'raced', owner: 'w', leaseMs: 60_000 });
    const thief = await pool.connect();
    try {
      // Another claim of the same job, not yet committed: it holds the row lock.
      await thief.query('BEGIN');
      await thief.query(
        `UPDATE "${lh.schema}".jobs SET lease_token = lease_token + 1, lease_owner = 'thief' WHERE id = $1`,
        [id],
      );
      const completing = completeJobs(lh.pool, lh.schema, [{ ...lease!, plain }]);
      // The completion has taken its snapshot and waits for the row.
      await waitFor(
        async () => {
          const { rows } = await pool.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE wait_event_type = 'Lock' AND datname = current_database()
               AND strpos(query, 'WITH input AS') > 0 AND strpos(query, $1) > 0`,
            // Near the start of the text: pg_stat_activity keeps only its first kilobyte.
            [`"${lh.schema}".jobs`],
          );
          return rows[0].n > 0;
        },
        { what: 'the completion to wait for the row lock' },
      );
      await thief.query('COMMIT');
      expect((await completing).size).toBe(0);
    } finally {
      thief.release();
    }
    const { rows } = await pool.query(
      `SELECT status::text, lease_owner FROM "${lh.schema}".jobs WHERE id = $1`,
      [id],
    );
    expect(rows).toEqual([{ status: 'running', lease_owner: 'thief' }]);
  });
});
