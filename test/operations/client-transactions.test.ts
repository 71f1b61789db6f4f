import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Lease, Leasehold } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

/** Runs `body` in a transaction on a client of its own, committed or rolled back as asked. */
async function inTransaction(
  pool: pg.Pool,
  end: 'COMMIT' | 'ROLLBACK',
  body: (c: pg.PoolClient) => Promise<unknown>,
) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const value = await body(client);
    await client.query(end);
    return value;
  } finally {
    client.release();
  }
}

async function claimed(lh: Leasehold): Promise<Lease> {
  const { id } = await lh.enqueue('tx', {}, { maxAttempts: 1 });
  const [lease] = await lh.claim({ queue: 'tx', owner: 'me' });
  if (!lease || lease.jobId !== id) throw new Error('expected to claim the job');
  return lease;
}

const status = async (lh: Leasehold, id: string) => (await lh.getJob(id))?.status;

describe('{ client } on the other transitions: commit keeps the effect, rollback undoes it', () => {
  for (const end of ['COMMIT', 'ROLLBACK'] as const) {
    const kept = end === 'COMMIT';

    it(`fail, ${end}`, async () => {
      const lh = await migratedClient({ backoff: noBackoff });
      const pool = testPool();
      const lease = await claimed(lh);
      const outcome = await inTransaction(pool, end, (client) => lh.fail(lease, new Error('x'), { client }));
      expect(outcome).toBe('dead');
      expect(await status(lh, lease.jobId)).toBe(kept ? 'dead' : 'running');
    });

    it(`snooze, ${end}`, async () => {
      const lh = await migratedClient({ backoff: noBackoff });
      const pool = testPool();
      const lease = await claimed(lh);
      expect(await inTransaction(pool, end, (client) => lh.snooze(lease, 60_000, { client }))).toBe(true);
      const job = await lh.getJob(lease.jobId);
      expect(job?.status).toBe(kept ? 'pending' : 'running');
      if (kept) expect(job?.attemptCount).toBe(0);
    });

    it(`heartbeat, ${end}`, async () => {
      const lh = await migratedClient({ backoff: noBackoff });
      const pool = testPool();
      const lease = await claimed(lh);
      const before = await pool.query(`SELECT lease_expires_at FROM "${lh.schema}".jobs WHERE id = $1`, [
        lease.jobId,
      ]);
      const ok = await inTransaction(pool, end, (client) =>
        lh.heartbeat(lease, { leaseMs: 600_000, client }),
      );
      expect(ok).toBe(true);
      const after = await pool.query(`SELECT lease_expires_at FROM "${lh.schema}".jobs WHERE id = $1`, [
        lease.jobId,
      ]);
      if (kept)
        expect(after.rows[0].lease_expires_at.getTime()).toBeGreaterThan(
          before.rows[0].lease_expires_at.getTime() + 60_000,
        );
      else expect(after.rows[0].lease_expires_at).toEqual(before.rows[0].lease_expires_at);
    });

    it(`cancel, ${end}`, async () => {
      const lh = await migratedClient({ backoff: noBackoff });
      const pool = testPool();
      const { id } = await lh.enqueue('tx', {});
      const result = await inTransaction(pool, end, (client) => lh.cancel(id, { reason: 'test', client }));
      expect(result).toEqual({ id, previousStatus: 'pending' });
      expect(await status(lh, id)).toBe(kept ? 'cancelled' : 'pending');
    });

    it(`replay, ${end}`, async () => {
      const lh = await migratedClient({ backoff: noBackoff });
      const pool = testPool();
      const lease = await claimed(lh);
      expect(await lh.fail(lease, new Error('x'))).toBe('dead');
      const result = await inTransaction(pool, end, (client) =>
        lh.replay([lease.jobId], { reason: 'test', client }),
      );
      expect(result).toEqual({ replayed: 1, ids: [lease.jobId] });
      expect(await status(lh, lease.jobId)).toBe(kept ? 'pending' : 'dead');
    });
  }

  it('snooze refuses a bad delay and a lost lease changes nothing', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const lease = await claimed(lh);
    await expect(lh.snooze(lease, -1)).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(lh.snooze(lease, 0, { bogus: 1 } as never)).rejects.toMatchObject({ code: 'VALIDATION' });
    expect(await lh.snooze({ ...lease, token: String(BigInt(lease.token) + 1n) }, 0)).toBe(false);
    expect(await status(lh, lease.jobId)).toBe('running');
  });
});
