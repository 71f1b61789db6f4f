import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { prunePass, RetentionService } from '../../src/maintenance/retention.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';

// A client checked out of a pg pool has no 'error' listener: when its connection dies (a backend
// terminated, a server restart), pg emits 'error' on it, and with nobody listening that is an
// uncaught exception that ends the process. Found by `npm run chaos` (pg_terminate_backend).

const uncaught: unknown[] = [];
const onUncaught = (err: unknown) => uncaught.push(err);

afterEach(() => {
  process.off('uncaughtException', onUncaught);
});

// Holds an exclusive lock on `table` so that the next statement touching it waits; then terminates
// the backend (of application `leasehold`) that waits for it, and releases the lock. Only a backend
// whose statement names this file's schema: the server is shared with other test files, whose own
// lock waits (concurrent migrations) are not this test's to terminate.
async function terminateWhileBlocked(pool: pg.Pool, table: string, start: () => Promise<unknown>) {
  const locker = await pool.connect();
  await locker.query('BEGIN');
  await locker.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  const pending = start().then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  const pid = await waitFor(
    async () =>
      (
        await pool.query(
          `SELECT pid FROM pg_stat_activity
           WHERE application_name = 'leasehold' AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
             AND position($1 in query) > 0`,
          [table.split('.')[0]],
        )
      ).rows[0]?.pid as number | undefined,
    { what: 'the statement to wait on the lock' },
  );
  await pool.query('SELECT pg_terminate_backend($1)', [pid]);
  const outcome = await pending;
  await locker.query('ROLLBACK');
  locker.release();
  // The connection's end arrives after the statement's error: give it time to be (mis)handled.
  await new Promise((resolve) => setTimeout(resolve, 300));
  return outcome;
}

describe('a checked-out connection that dies', () => {
  it('a history read whose backend is terminated mid-snapshot rejects with a DatabaseError and the process lives on', async () => {
    process.on('uncaughtException', onUncaught);
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue('q', { n: 1 });
    const outcome = await terminateWhileBlocked(pool, `"${lh.schema}".jobs`, () =>
      lh.getJob(id, { history: true }),
    );
    expect(outcome).toMatchObject({ error: { code: 'DATABASE' } });
    expect(uncaught).toEqual([]);
    expect((await lh.getJob(id))?.status).toBe('pending'); // the pool recovered
  });

  it('a retention pass whose backend is terminated fails that pass and the process lives on', async () => {
    process.on('uncaughtException', onUncaught);
    const lh = await migratedClient();
    const pool = testPool();
    const errors: unknown[] = [];
    const service = new RetentionService({
      intervalMs: 60_000,
      pool: lh.pool,
      schema: lh.schema,
      prune: (db) => prunePass(db, lh.schema, { succeededRetentionMs: 0, batchSize: 100, limit: 1000 }),
      onError: (err) => errors.push(err),
    });
    const outcome = await terminateWhileBlocked(pool, `"${lh.schema}".finished_jobs`, () =>
      service.runOnce(),
    );
    expect(outcome).toHaveProperty('error');
    expect(uncaught).toEqual([]);
    expect((await service.runOnce()).skipped).toBe(false); // the lock was not left behind
  });
});
