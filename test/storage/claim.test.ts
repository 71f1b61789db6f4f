import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Leasehold } from '../../src/index.js';
import { databaseUrl, directDatabaseUrl, migratedClient, testPool } from '../support/db.js';
import { claimableSince } from '../support/job-states.js';

describe('claim', () => {
  it('gives 8 concurrent claimers unique leases, and every one of 2,000 jobs is claimed exactly once', async () => {
    const lh = await migratedClient({ poolSize: 10 });
    await lh.enqueueMany(
      'bulk',
      Array.from({ length: 2000 }, (_, i) => ({ payload: { i } })),
    );
    // Eight clients, each with a connection of its own, claiming in a loop until the queue is dry.
    const claimers = Array.from({ length: 8 }, (_, n) => {
      const own = new Leasehold({ connectionString: databaseUrl(), schema: lh.schema, poolSize: 1 });
      return { owner: `claimer-${n}`, client: own };
    });
    try {
      const results = await Promise.all(
        claimers.map(async ({ owner, client }) => {
          const seen: { id: string; token: string }[] = [];
          for (;;) {
            const leases = await client.claim({ queue: 'bulk', owner, limit: 7 });
            if (leases.length === 0) return seen;
            for (const lease of leases) seen.push({ id: lease.jobId, token: lease.token });
          }
        }),
      );
      const all = results.flat();
      expect(all).toHaveLength(2000);
      expect(new Set(all.map((l) => l.id)).size).toBe(2000);
      expect(new Set(all.map((l) => `${l.id}/${l.token}`)).size).toBe(2000);
      // Every claimer got a share: the claims really ran concurrently.
      expect(results.filter((r) => r.length > 0).length).toBeGreaterThan(1);
    } finally {
      await Promise.all(claimers.map(({ client }) => client.close()));
    }
  });

  it('claims in priority order, then by availability, then by id', async () => {
    const lh = await migratedClient();
    const low = await lh.enqueue('ordered', { n: 'low' }, { priority: -1 });
    const first = await lh.enqueue('ordered', { n: 'first' });
    const second = await lh.enqueue('ordered', { n: 'second' });
    const high = await lh.enqueue('ordered', { n: 'high' }, { priority: 5 });
    const order: string[] = [];
    for (;;) {
      const [lease] = await lh.claim({ queue: 'ordered', owner: 'o' });
      if (!lease) break;
      order.push(lease.jobId);
    }
    expect(order).toEqual([high.id, first.id, second.id, low.id]);
  });

  it('returns a batch in preference order and starts each lease in database time', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany('batch', [{ payload: 1 }, { payload: 2, priority: 3 }, { payload: 3 }]);
    const leases = await lh.claim({ queue: 'batch', owner: 'w', limit: 10, leaseMs: 5000 });
    expect(leases.map((l) => l.payload)).toEqual([2, 1, 3]);
    const { rows } = await pool.query(
      `SELECT bool_and(lease_expires_at BETWEEN now() + interval '3 seconds' AND now() + interval '5 seconds') AS ok,
              bool_and(attempt_count = 1 AND lease_token = 1 AND lease_owner = 'w') AS fenced
       FROM "${lh.schema}".jobs`,
    );
    expect(rows[0]).toEqual({ ok: true, fenced: true });
    expect(leases.every((l) => l.attempt === 1 && l.token === '1' && l.owner === 'w')).toBe(true);
    // Each lease carries its expiry exactly as the database stored it (to the millisecond).
    for (const lease of leases) {
      const stored = await lh.getJob(lease.jobId);
      expect(lease.expiresAt).toBeInstanceOf(Date);
      expect(lease.expiresAt.getTime()).toBe(stored?.leaseExpiresAt?.getTime());
    }
  });

  it('does not claim a delayed job before its time', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const delayed = await lh.enqueue('later', { x: 1 }, { delayMs: 60_000 });
    const future = await lh.enqueue('later', { x: 2 }, { runAt: new Date(Date.now() + 3_600_000) });
    expect(await lh.claim({ queue: 'later', owner: 'w', limit: 10 })).toEqual([]);
    // Move the first job's time into the past (database time), and only it becomes claimable.
    await claimableSince(pool, lh.schema, 1000, { ids: [delayed.id] });
    const leases = await lh.claim({ queue: 'later', owner: 'w', limit: 10 });
    expect(leases.map((l) => l.jobId)).toEqual([delayed.id]);
    expect((await lh.getJob(future.id))?.status).toBe('pending');
  });

  it('claims other jobs without waiting while one job row is locked by an open transaction', async () => {
    const setup = await migratedClient();
    // A claim that waited on the lock would fail with statement_timeout instead of hanging. The
    // timeout is a session setting (a pooler refuses it at start-up), so this pool connects directly.
    const impatient = new pg.Pool({ connectionString: directDatabaseUrl(), statement_timeout: 2000 });
    const lh = new Leasehold({ pool: impatient, schema: setup.schema });
    const { ids } = await lh.enqueueMany('locked', [{ payload: 'a' }, { payload: 'b' }, { payload: 'c' }]);
    const blocker = new pg.Client({ connectionString: databaseUrl() });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT id FROM "${lh.schema}".jobs WHERE id = $1 FOR UPDATE`, [ids[0]]);
      const leases = await lh.claim({ queue: 'locked', owner: 'w', limit: 10 });
      expect(leases.map((l) => l.jobId).sort()).toEqual([ids[1], ids[2]].sort());
      await blocker.query('ROLLBACK');
      const after = await lh.claim({ queue: 'locked', owner: 'w', limit: 10 });
      expect(after.map((l) => l.jobId)).toEqual([ids[0]]);
    } finally {
      await blocker.end();
      await impatient.end();
    }
  });

  it('claims only from the named queue', async () => {
    const lh = await migratedClient();
    await lh.enqueue('a', {});
    const b = await lh.enqueue('b', {});
    const leases = await lh.claim({ queue: 'b', owner: 'w', limit: 10 });
    expect(leases.map((l) => [l.jobId, l.queue])).toEqual([[b.id, 'b']]);
  });
});
