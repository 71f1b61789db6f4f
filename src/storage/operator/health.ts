import { defineStatement, type Queryable, run } from '../db.js';

/**
 * OldestTransactionRead: the oldest open transaction in this database that holds back cleanup (it
 * holds a snapshot, `backend_xmin`, or a transaction id, `backend_xid`: VACUUM cannot remove rows
 * that died after it started), other than this session. Reads pg_stat_activity (one row per backend, no locks). The query text is
 * never read: it may carry application data.
 */
const OldestTransactionRead = defineStatement(
  'read_oldest_transaction',
  () => `
  SELECT pid, coalesce(application_name, '') AS application_name, coalesce(state, '') AS state,
         (extract(epoch FROM now() - xact_start) * 1000)::float8 AS age_ms
  FROM pg_stat_activity
  WHERE datname = current_database()
    AND pid <> pg_backend_pid()
    AND xact_start IS NOT NULL
    AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
  ORDER BY xact_start
  LIMIT 1`,
);

/**
 * JobsTupleRead: live and dead tuple estimates of the jobs table, summed over its lanes (migration
 * 018), from pg_stat_user_tables (the statistics collector's counters, updated a moment after each
 * transaction; no table scan), and when autovacuum last ran on any of them.
 */
const JobsTupleRead = defineStatement(
  'read_jobs_tuples',
  (s) => `
  SELECT sum(n_live_tup)::float8 AS live, sum(n_dead_tup)::float8 AS dead,
         max(greatest(last_vacuum, last_autovacuum)) AS last_vacuum
  FROM pg_stat_user_tables
  WHERE schemaname = $1
    AND relid IN (SELECT relid FROM pg_partition_tree('${s}.jobs'::regclass) WHERE isleaf)
  HAVING count(*) > 0`,
);

/** The oldest open transaction holding back cleanup. */
export interface OldestTransactionRow {
  pid: number;
  application_name: string;
  state: string;
  age_ms: number;
}

/** Reads the oldest open transaction holding back cleanup, or null. */
export async function readOldestTransaction(
  db: Queryable,
  schema: string,
): Promise<OldestTransactionRow | null> {
  const rows = await run<OldestTransactionRow>(db, OldestTransactionRead(schema), []);
  return rows[0] ?? null;
}

/** Reads the jobs table's tuple counters; null when the statistics have no row for it yet. */
export async function readJobsTuples(
  db: Queryable,
  schema: string,
): Promise<{ live: number; dead: number; last_vacuum: Date | null } | null> {
  const rows = await run<{ live: number; dead: number; last_vacuum: Date | null }>(
    db,
    JobsTupleRead(schema),
    [schema],
  );
  return rows[0] ?? null;
}
