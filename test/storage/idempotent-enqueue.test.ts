import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/index.js';
import { databaseUrl, migratedClient, testPool, waitFor } from '../support/db.js';
import { finishedSince } from '../support/job-states.js';

describe('idempotent enqueue', () => {
  it('a second enqueue with the same key returns the existing job and says it was not created', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const first = await lh.enqueue('orders', { order: 1 }, { idempotencyKey: 'order-1' });
    expect(first.created).toBe(true);
    const again = await lh.enqueue('orders', { order: 'different payload' }, { idempotencyKey: 'order-1' });
    expect(again).toEqual({ id: first.id, created: false });
    expect((await lh.getJob(first.id))?.payload).toEqual({ order: 1 });
    // Keys are per queue; no key means no deduplication.
    expect((await lh.enqueue('refunds', {}, { idempotencyKey: 'order-1' })).created).toBe(true);
    expect(await lh.enqueue('orders', { order: 1 })).toMatchObject({ created: true });
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".jobs`);
    expect(rows[0].n).toBe(3);
    await expect(lh.enqueue('orders', {}, { idempotencyKey: '' })).rejects.toThrow(ValidationError);
    await expect(lh.enqueue('orders', {}, { idempotencyKey: 'k'.repeat(201) })).rejects.toThrow(
      ValidationError,
    );
  });

  it('100 concurrent callers with one key make exactly one row, and all get its id', async () => {
    const lh = await migratedClient({ poolSize: 25 });
    const pool = testPool();
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => lh.enqueue('race', { caller: i }, { idempotencyKey: 'the-one' })),
    );
    const { rows } = await pool.query(`SELECT id::text FROM "${lh.schema}".jobs`);
    expect(rows).toHaveLength(1);
    expect(new Set(results.map((r) => r.id))).toEqual(new Set([rows[0].id]));
    expect(results.filter((r) => r.created)).toHaveLength(1);
  });

  it('is correct inside caller transactions: concurrent ones agree, and a rollback frees the key', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const clients = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        // Named, so a transaction's server process can be found (behind a pooler too).
        const client = new pg.Client({ connectionString: databaseUrl(), application_name: `tx-${i}` });
        await client.connect();
        return client;
      }),
    );
    try {
      // Ten transactions at once, each enqueueing the same key and committing.
      const ids = await Promise.all(
        clients.map(async (client, i) => {
          await client.query('BEGIN');
          const result = await lh.enqueue('tx', { i }, { client, idempotencyKey: 'shared' });
          await client.query('COMMIT');
          return result;
        }),
      );
      expect(new Set(ids.map((r) => r.id)).size).toBe(1);
      expect(ids.filter((r) => r.created)).toHaveLength(1);

      // The first transaction holds the key; the second waits on it; the first rolls back.
      const [a, b] = clients as [pg.Client, pg.Client];
      await a.query('BEGIN');
      const held = await lh.enqueue('tx', { from: 'a' }, { client: a, idempotencyKey: 'fragile' });
      await b.query('BEGIN');
      const waiting = lh.enqueue('tx', { from: 'b' }, { client: b, idempotencyKey: 'fragile' });
      await waitFor(
        async () =>
          (
            await pool.query(
              `SELECT 1 FROM pg_stat_activity WHERE application_name = 'tx-1' AND wait_event_type = 'Lock'`,
            )
          ).rowCount,
        { what: 'the second transaction waiting on the key' },
      );
      await a.query('ROLLBACK');
      const second = await waiting;
      await b.query('COMMIT');
      expect(held.created).toBe(true);
      expect(second.created).toBe(true);
      expect(second.id).not.toBe(held.id);
      expect(await lh.getJob(held.id)).toBeNull();
      expect((await lh.getJob(second.id))?.payload).toEqual({ from: 'b' });
    } finally {
      await Promise.all(clients.map((client) => client.end()));
    }
  });

  it('the key stays taken while the job is kept, through success, and is freed when retention removes it', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue('once', {}, { idempotencyKey: 'daily-2024-05-01' });
    const [lease] = await lh.claim({ queue: 'once', owner: 'w' });
    expect(await lh.complete(lease!)).toBe(true);
    expect(await lh.enqueue('once', {}, { idempotencyKey: 'daily-2024-05-01' })).toEqual({
      id,
      created: false,
    });
    // Past its retention, the finished job goes, and its key with it.
    await finishedSince(pool, lh.schema, 7_200_000, { succeeded: true });
    expect(await lh.prune()).toMatchObject({ succeeded: 1 });
    const fresh = await lh.enqueue('once', {}, { idempotencyKey: 'daily-2024-05-01' });
    expect(fresh.created).toBe(true);
    expect(fresh.id).not.toBe(id);
  });

  it('plain enqueue writes no key row', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueue('plain', {});
    await lh.enqueueMany('plain', [{ payload: 1 }]);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".job_keys`);
    expect(rows[0].n).toBe(0);
  });
});
