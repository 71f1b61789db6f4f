import type pg from 'pg';
import { toDatabaseError } from '../../../shared/errors.js';
import { guardCheckedOut, type Queryable } from '../../db.js';

/**
 * Runs `use` in a read-committed transaction on one pooled connection (BEGIN ... COMMIT, rolled
 * back on error): a deduplicated batch whose stale items are run again stays all or nothing.
 */
export async function inWriteTransaction<T>(pool: pg.Pool, use: (db: Queryable) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const unguard = guardCheckedOut(client);
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    try {
      const result = await use(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch((rollbackErr: unknown) => {
        broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
      });
      throw err;
    }
  } catch (err) {
    throw toDatabaseError(err, 'enqueue_deduped transaction', 'enqueue');
  } finally {
    unguard();
    client.release(broken);
  }
}
