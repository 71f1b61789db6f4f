import type pg from 'pg';
import { toDatabaseError } from '../../shared/errors.js';
import { defineStatement, guardCheckedOut, type Queryable, run } from '../db.js';

/** Most recorded events one history read returns; the oldest are kept when a job has more. */
export const MAX_HISTORY_EVENTS = 5000;

/**
 * JobEventList: a job's recorded events, oldest first (id order is the order the statements that
 * wrote them took the job's row lock). Read-only, no locks; served by job_events_job_idx.
 * The ORDER BY names `e.id`: a bare `id` would sort by the `id::text` output column (10 before 9).
 */
const JobEventList = defineStatement(
  'list_job_events',
  (s) => `
  SELECT e.id::text, e.job_id::text, e.queue_name, e.kind, e.at, e.status_after, e.attempt,
         e.lease_owner, e.lease_token::text, e.claimed_at, e.lease_extensions, e.error_code,
         e.error_class, e.message, e.delay_ms, e.actor, e.reason, e.detail
  FROM ${s}.job_events AS e
  WHERE e.job_id = $1
  ORDER BY e.id
  LIMIT $2`,
);

/**
 * JobAttemptFacts: what the live job row (or the finished record) knows of its latest claim beyond
 * the `Job` shape: the lease extensions counted so far. Primary-key lookups, no locks.
 */
const JobAttemptFacts = defineStatement(
  'job_attempt_facts',
  (s) => `
  SELECT lease_extensions FROM ${s}.jobs WHERE id = $1
  UNION ALL
  SELECT lease_extensions FROM ${s}.finished_jobs WHERE id = $1`,
);

/** A job_events row as stored. */
export interface EventRow {
  id: string;
  job_id: string;
  queue_name: string;
  kind: string;
  at: Date;
  status_after: string | null;
  attempt: number | null;
  lease_owner: string | null;
  lease_token: string | null;
  claimed_at: Date | null;
  lease_extensions: number | null;
  error_code: string | null;
  error_class: string | null;
  message: string | null;
  delay_ms: number | null;
  actor: string | null;
  reason: string | null;
  detail: unknown;
}

/** Reads a job's recorded events, oldest first, at most `limit`. */
export function readJobEvents(
  db: Queryable,
  schema: string,
  jobId: string,
  limit = MAX_HISTORY_EVENTS,
): Promise<EventRow[]> {
  return run<EventRow>(db, JobEventList(schema), [jobId, limit]);
}

/** Lease extensions of the job's latest claim; null when the job is gone. */
export async function readLeaseExtensions(
  db: Queryable,
  schema: string,
  jobId: string,
): Promise<number | null> {
  const rows = await run<{ lease_extensions: number }>(db, JobAttemptFacts(schema), [jobId]);
  return rows[0]?.lease_extensions ?? null;
}

/**
 * Runs `use` inside a read-only repeatable-read transaction on one connection, so several reads
 * see one snapshot (a job row and its events agree even while the job moves).
 */
export async function inReadSnapshot<T>(pool: pg.Pool, use: (db: Queryable) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const unguard = guardCheckedOut(client);
  let broken: Error | undefined;
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    try {
      return await use(client);
    } finally {
      await client.query('COMMIT');
    }
  } catch (err) {
    // A connection left mid-transaction must not go back to the pool.
    broken = err instanceof Error ? err : new Error(String(err));
    throw toDatabaseError(err, 'read snapshot', 'getJob');
  } finally {
    unguard();
    client.release(broken);
  }
}
