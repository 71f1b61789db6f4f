import type pg from 'pg';
import { defineStatement, guardCheckedOut, type Queryable, run } from '../db.js';

// First key of the two-key advisory lock that one maintenance task (named by $1) takes per schema
// ($2); the migrator uses 0x4c48 for its own, so the two never collide.
const MAINTENANCE_LOCK_CLASS = 0x4c4d;

/**
 * MaintenanceLockTry: takes a transaction-level advisory lock for one task on one schema, without
 * waiting. Transaction-level, not session-level: it works behind a transaction-mode pooler (which
 * hands each transaction any server connection), and it ends with the transaction, so a crashed or
 * disconnected holder can never keep it. Touches no table.
 */
const MaintenanceLockTry = defineStatement(
  'maintenance_lock_try',
  () => `SELECT pg_try_advisory_xact_lock(${MAINTENANCE_LOCK_CLASS}, hashtext($1 || ':' || $2)) AS locked`,
);

/** Tries the lock for `task` on `schema` inside the transaction open on `db`; true when taken. */
export async function tryMaintenanceLock(db: Queryable, schema: string, task: string): Promise<boolean> {
  const rows = await run<{ locked: boolean }>(db, MaintenanceLockTry(schema), [task, schema]);
  return rows[0]?.locked ?? false;
}

/**
 * Runs `work` in one short transaction that holds the lock for `task` on `schema`; resolves null,
 * running nothing, when another transaction holds it. Meant for one bounded batch: the lock lasts
 * exactly as long as the batch's transaction.
 */
export async function withMaintenanceLock<T>(
  pool: pg.Pool,
  schema: string,
  task: string,
  work: (db: Queryable) => Promise<T>,
): Promise<T | null> {
  const client = await pool.connect();
  const unguard = guardCheckedOut(client);
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    if (!(await tryMaintenanceLock(client, schema, task))) {
      await client.query('ROLLBACK');
      return null;
    }
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    // A connection whose transaction state is unknown must not go back to the pool.
    broken = err instanceof Error ? err : new Error(String(err));
    throw err;
  } finally {
    unguard();
    client.release(broken);
  }
}
