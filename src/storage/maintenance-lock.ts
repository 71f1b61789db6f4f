import { defineStatement, type Queryable, run } from './db.js';

// First key of the two-key advisory lock that one maintenance task (named by $1) takes per schema
// ($2); the migrator uses 0x4c48 for its own, so the two never collide.
const MAINTENANCE_LOCK_CLASS = 0x4c4d;

/**
 * MaintenanceLockTry: takes a session-level advisory lock for one task on one schema, without
 * waiting. Session-level, so it holds across the task's short per-batch transactions, and is let
 * go if the process dies (its connection ends). Touches no table.
 */
const MaintenanceLockTry = defineStatement(
  'maintenance_lock_try',
  () => `SELECT pg_try_advisory_lock(${MAINTENANCE_LOCK_CLASS}, hashtext($1 || ':' || $2)) AS locked`,
);

/** MaintenanceLockRelease: lets go of the lock taken by MaintenanceLockTry on this session. */
const MaintenanceLockRelease = defineStatement(
  'maintenance_lock_release',
  () => `SELECT pg_advisory_unlock(${MAINTENANCE_LOCK_CLASS}, hashtext($1 || ':' || $2)) AS released`,
);

/** Tries the lock for `task` on `schema` on this connection; true when taken. */
export async function tryMaintenanceLock(db: Queryable, schema: string, task: string): Promise<boolean> {
  const rows = await run<{ locked: boolean }>(db, MaintenanceLockTry(schema), [task, schema]);
  return rows[0]?.locked ?? false;
}

/** Releases the lock for `task` on `schema` held by this connection. */
export async function releaseMaintenanceLock(db: Queryable, schema: string, task: string): Promise<void> {
  await run(db, MaintenanceLockRelease(schema), [task, schema]);
}
