import { defineStatement, type Queryable, run } from '../db.js';

/** Where a waited-for job stands, as `lh.waitFor` reads it. */
export interface WaitState {
  id: string;
  /** pending, running, succeeded, dead or cancelled. */
  status: string;
  /** The stored result, once succeeded. */
  result: unknown;
  errorCode: string | null;
  errorClass: string | null;
  errorMessage: string | null;
  /** The job will be announced when it ends (its notify_on_finish flag is set, or it already ended). */
  marked: boolean;
}

interface WaitRow {
  id: string;
  status: string;
  result: unknown;
  last_error_code: string | null;
  last_error_class: string | null;
  last_error_message: string | null;
  marked: boolean;
}

// The finished records of the same ids: a succeeded job, with its result.
const FINISHED_BRANCH = (s: string) => `
  UNION ALL
  SELECT f.id::text, 'succeeded', f.result, NULL, NULL, NULL, true
  FROM ${s}.finished_jobs AS f
  WHERE f.id = ANY ($1::bigint[])`;

/**
 * JobWaitRead: where each of the jobs $1 stands, for `lh.waitFor`'s poll and its check after a
 * notification: live, dead or cancelled ones from jobs, succeeded ones (with their result) from
 * finished_jobs. Primary-key lookups; no locks. Reads the error summary, never payload or stack.
 */
const JobWaitRead = defineStatement(
  'read_waited_jobs',
  (s) => `
  SELECT j.id::text AS id, j.status::text AS status, NULL::jsonb AS result, j.last_error_code,
         j.last_error_class, j.last_error_message, j.notify_on_finish AS marked
  FROM ${s}.jobs AS j
  WHERE j.id = ANY ($1::bigint[])
  ${FINISHED_BRANCH(s)}`,
);

/**
 * JobWaitMark: pending/running -> the same, with notify_on_finish set, for the jobs $1 someone
 * starts to wait for; then reads them as JobWaitRead does. The flag makes the statement that ends
 * the job notify (finish-notices.ts). The flag is set by wait_for_jobs() (migration 011: a
 * security-definer function, so that any role that reads jobs may wait without an UPDATE grant),
 * which skips rows already flagged and takes the row lock of each job it flags (primary-key
 * lookups). It runs only when the read finds a live job not yet flagged (the `OR` reads `marked`
 * only then): nothing is written for a job already flagged or ended. A job ending concurrently is
 * either flagged before its end (then announced) or found ended by the function (then not
 * `marked`, and the waiter reads again at once, since the read here saw the snapshot before).
 */
const JobWaitMark = defineStatement(
  'mark_waited_jobs',
  (s) => `
  WITH marked AS MATERIALIZED (
    SELECT ${s}.wait_for_jobs($1::bigint[]) AS id
  )
  SELECT j.id::text AS id, j.status::text AS status, NULL::jsonb AS result, j.last_error_code,
         j.last_error_class, j.last_error_message,
         j.notify_on_finish OR j.id IN (SELECT id FROM marked) AS marked
  FROM ${s}.jobs AS j
  WHERE j.id = ANY ($1::bigint[])
  ${FINISHED_BRANCH(s)}`,
);

/** Reads where the jobs `ids` stand (a job not found is left out); with `mark`, flags live ones first. */
export async function readWaitedJobs(
  db: Queryable,
  schema: string,
  ids: readonly string[],
  mark: boolean,
): Promise<WaitState[]> {
  if (ids.length === 0) return [];
  const rows = await run<WaitRow>(db, (mark ? JobWaitMark : JobWaitRead)(schema), [ids]);
  return rows.map((row) => ({
    id: row.id,
    status: row.status,
    result: row.result ?? null,
    errorCode: row.last_error_code,
    errorClass: row.last_error_class,
    errorMessage: row.last_error_message,
    marked: row.marked,
  }));
}
