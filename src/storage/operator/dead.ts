import { defineStatement, type Queryable, run } from '../db.js';

// A timestamptz rendered exactly (microseconds, UTC, ISO 8601): a keyset cursor must not lose the
// precision a JavaScript Date would, and ISO input parses the same under any DateStyle.
const EXACT_TIME = (column: string) =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

// Every column is qualified, and so is every ORDER BY term: a bare `id` there would sort by the
// `id::text` output column (text order: 10 before 9), which the bigint cursor does not follow.
const DEAD_COLUMNS = `j.id::text, j.queue_name, j.priority, j.attempt_count, j.max_attempts,
         j.last_error_code, j.last_error_class, j.last_error_message, j.created_at, j.finished_at,
         ${EXACT_TIME('j.finished_at')} AS cursor_at, budget.attempt_budget`;

// The attempt budget its death recorded (on its latest `dead` event): job_events_job_idx, one
// short probe per listed job.
const BUDGET_JOIN = (s: string) => `
  LEFT JOIN LATERAL (
    SELECT (e.detail->>'attemptBudget')::int AS attempt_budget
    FROM ${s}.job_events AS e
    WHERE e.job_id = j.id AND e.kind = 'dead'
    ORDER BY e.id DESC
    LIMIT 1
  ) AS budget ON true`;

/**
 * DeadJobListByQueue: dead jobs of queue $1, newest death first, keyset-paged by (finished_at, id)
 * below ($2, $3) and before $4, optionally of error code $5, at most $6. Read-only, no locks;
 * served by jobs_terminal_queue_idx (a backward range scan). Cancelled jobs are not dead.
 */
const DeadJobListByQueue = defineStatement(
  'list_dead_by_queue',
  (s) => `
  SELECT ${DEAD_COLUMNS}
  FROM ${s}.jobs AS j${BUDGET_JOIN(s)}
  WHERE j.queue_name = $1
    AND j.finished_at IS NOT NULL
    AND (j.finished_at, j.id) < ($2::timestamptz, $3::bigint)
    AND j.finished_at < $4::timestamptz
    AND j.status = 'dead'
    AND ($5::text IS NULL OR j.last_error_code = $5)
  ORDER BY j.finished_at DESC, j.id DESC
  LIMIT $6`,
);

/** DeadJobList: the same across every queue; served by jobs_terminal_finished_idx. */
const DeadJobList = defineStatement(
  'list_dead',
  (s) => `
  SELECT ${DEAD_COLUMNS}
  FROM ${s}.jobs AS j${BUDGET_JOIN(s)}
  WHERE j.finished_at IS NOT NULL
    AND (j.finished_at, j.id) < ($1::timestamptz, $2::bigint)
    AND j.finished_at < $3::timestamptz
    AND j.status = 'dead'
    AND ($4::text IS NULL OR j.last_error_code = $4)
  ORDER BY j.finished_at DESC, j.id DESC
  LIMIT $5`,
);

/** A dead job as listed: its error summary, never its payload. */
export interface DeadJobRow {
  id: string;
  queue_name: string;
  priority: number;
  attempt_count: number;
  max_attempts: number;
  last_error_code: string | null;
  last_error_class: string | null;
  last_error_message: string | null;
  created_at: Date;
  finished_at: Date;
  cursor_at: string;
  attempt_budget: number | null;
}

/** Where a page starts: below this (finished_at, id); the exact time as ISO text. */
export interface DeadCursor {
  at: string;
  id: string;
}

/** Reads one page of dead jobs, newest first. */
export function listDeadJobs(
  db: Queryable,
  schema: string,
  params: {
    queue: string | null;
    errorCode: string | null;
    before: Date | null;
    after: DeadCursor | null;
    limit: number;
  },
): Promise<DeadJobRow[]> {
  const at = params.after?.at ?? 'infinity';
  const id = params.after?.id ?? '9223372036854775807';
  const before = params.before ?? 'infinity';
  if (params.queue !== null) {
    return run<DeadJobRow>(db, DeadJobListByQueue(schema), [
      params.queue,
      at,
      id,
      before,
      params.errorCode,
      params.limit,
    ]);
  }
  return run<DeadJobRow>(db, DeadJobList(schema), [at, id, before, params.errorCode, params.limit]);
}
