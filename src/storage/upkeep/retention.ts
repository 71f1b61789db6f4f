import { defineStatement, type Queryable, run } from '../db.js';

// A removed job takes its satellite rows with it, in the same statement: its recorded events, its
// effects ledger, its durable steps and its idempotency key (so the key may be used again). Each is
// a lookup by job id (job_events_job_idx, job_effects' and job_steps' primary keys,
// job_keys_job_idx, dedupe_keys_job_idx). `removed`
// names the CTE holding the removed ids. A dedupe key naming the job goes too, unless it is a
// throttle window still open: that window outlives the job it kept (see migration 013).
const SATELLITES = (s: string) => `
  gone_events AS (
    DELETE FROM ${s}.job_events AS e USING removed WHERE e.job_id = removed.id
  ),
  gone_effects AS (
    DELETE FROM ${s}.job_effects AS e USING removed WHERE e.job_id = removed.id
  ),
  gone_steps AS (
    DELETE FROM ${s}.job_steps AS st USING removed WHERE st.job_id = removed.id
  ),
  gone_waits AS (
    DELETE FROM ${s}.job_waits AS w USING removed WHERE w.job_id = removed.id
  ),
  -- job.invoke's edges (026: of no flow), both ways: with the invoking job and with the invoked one.
  gone_invoking AS (
    DELETE FROM ${s}.job_dependencies AS d USING removed WHERE d.child_id = removed.id AND d.flow_id IS NULL
  ),
  gone_invoked AS (
    DELETE FROM ${s}.job_dependencies AS d USING removed WHERE d.parent_id = removed.id AND d.flow_id IS NULL
  ),
  gone_keys AS (
    DELETE FROM ${s}.job_keys AS k USING removed WHERE k.job_id = removed.id
  ),
  gone_dedupe_keys AS (
    DELETE FROM ${s}.dedupe_keys AS k USING removed
    WHERE k.job_id = removed.id AND (k.mode <> 'throttle' OR k.window_ends_at <= now())
  )`;

/**
 * FinishedJobPruneBatch: succeeded -> (removed), for one bounded batch of finished_jobs rows past
 * their queue's succeeded retention (or the default $2 ms). Keyset-paged by (finished_at, id) above
 * ($3, $4) over the rows older than the shortest retention in force, at most $1 examined; each row
 * is then removed if it is past its own queue's retention, so a queue that keeps its jobs longer
 * is stepped over, not rescanned, within a pass. Served by finished_jobs_finished_at_idx; locks
 * rows FOR UPDATE SKIP LOCKED, so concurrent passes share the work. A succeeded job leaves no
 * tombstone (the trail would grow as fast as the work it prunes), and its events go with it.
 */
const FinishedJobPruneBatch = defineStatement(
  'prune_finished',
  (s) => `
  WITH candidate AS (
    SELECT f.id, f.queue_name, f.finished_at
    FROM ${s}.finished_jobs AS f
    WHERE f.finished_at < now() - least($2::double precision,
            coalesce((SELECT min(succeeded_retention_ms) FROM ${s}.queues), $2::double precision))
            * interval '1 millisecond'
      AND (f.finished_at, f.id) > ($3::timestamptz, $4::bigint)
    ORDER BY f.finished_at, f.id
    LIMIT $1
    FOR UPDATE OF f SKIP LOCKED
  ),
  removed AS (
    DELETE FROM ${s}.finished_jobs AS f
    USING candidate AS c LEFT JOIN ${s}.queues AS q ON q.name = c.queue_name
    WHERE f.id = c.id
      AND f.finished_at < now() - coalesce(q.succeeded_retention_ms::double precision, $2::double precision)
                                  * interval '1 millisecond'
    RETURNING f.id
  ),
  ${SATELLITES(s)}
  SELECT (SELECT count(*) FROM candidate)::int AS seen,
         (SELECT count(*) FROM removed)::int AS removed,
         last.cursor_at, last.id::text AS cursor_id
  FROM (SELECT 1) AS one
  LEFT JOIN (
    SELECT to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cursor_at, id
    FROM candidate
    ORDER BY finished_at DESC, id DESC
    LIMIT 1
  ) AS last ON true`,
);

/**
 * TerminalJobPruneBatch: dead or cancelled -> (removed), for at most $1 jobs older than their
 * queue's dead retention. Only queues with a retention set are visited: by default terminal jobs
 * are kept until an operator acts. Each removal leaves a `removed` tombstone event (what it was,
 * why, when) in place of the job's other events. Served by jobs_terminal_queue_idx per queue;
 * FOR UPDATE SKIP LOCKED, and the delete re-checks the status, so a job replayed meanwhile stays.
 * Dead heads of ordering keys are kept whatever the retention: they block their key until an
 * operator replays or skips them (skipped jobs are cancelled, and pruned as such). So are dead or
 * cancelled flow jobs that still hold a pending child back.
 */
const TerminalJobPruneBatch = defineStatement(
  'prune_terminal',
  (s) => `
  WITH doomed AS (
    SELECT j.id, q.dead_retention_ms
    FROM ${s}.queues AS q
    JOIN ${s}.jobs AS j ON j.queue_name = q.name
    WHERE q.dead_retention_ms IS NOT NULL
      AND j.finished_at IS NOT NULL
      AND j.finished_at < now() - q.dead_retention_ms * interval '1 millisecond'
      -- A dead job with an ordering key heads its key: removing it would unblock the key silently.
      AND (j.ordering_key IS NULL OR j.status <> 'dead')
      -- A flow job holding children back (policy 'block') is what getFlow and blockedFlows show as the
      -- cause, and what a replay resumes from: kept while any such child waits.
      AND NOT (j.has_children AND EXISTS (
        SELECT 1 FROM ${s}.job_dependencies AS d JOIN ${s}.jobs AS c ON c.id = d.child_id
        WHERE d.parent_id = j.id AND NOT d.resolved AND c.status = 'pending'))
    LIMIT $1
    FOR UPDATE OF j SKIP LOCKED
  ),
  removed AS (
    DELETE FROM ${s}.jobs AS j
    USING doomed
    WHERE j.id = doomed.id AND j.status IN ('dead', 'cancelled') AND j.finished_at IS NOT NULL
    RETURNING j.id, j.queue_name, j.status, j.attempt_count, j.max_attempts, j.last_error_code,
              j.created_at, j.finished_at, doomed.dead_retention_ms
  ),
  ${SATELLITES(s)},
  tombstones AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, attempt, error_code, reason, detail)
    SELECT id, queue_name, 'removed', attempt_count, last_error_code, 'retention',
           jsonb_build_object('status', status, 'createdAt', created_at, 'finishedAt', finished_at,
                              'maxAttempts', max_attempts, 'retentionMs', dead_retention_ms)
    FROM removed
  )
  SELECT (SELECT count(*) FROM doomed)::int AS seen, count(*)::int AS removed FROM removed`,
);

/** Where a pass over finished_jobs has got to. */
export interface FinishedCursor {
  at: string;
  id: string;
}

/** Prunes one batch of succeeded jobs; returns what it examined, removed, and where to go on. */
export async function pruneFinishedBatch(
  db: Queryable,
  schema: string,
  params: { limit: number; defaultRetentionMs: number; after: FinishedCursor | null },
): Promise<{ seen: number; removed: number; next: FinishedCursor | null }> {
  const rows = await run<{
    seen: number;
    removed: number;
    cursor_at: string | null;
    cursor_id: string | null;
  }>(db, FinishedJobPruneBatch(schema), [
    params.limit,
    params.defaultRetentionMs,
    params.after?.at ?? '-infinity',
    params.after?.id ?? '0',
  ]);
  const row = rows[0];
  const next = row?.cursor_at && row.cursor_id ? { at: row.cursor_at, id: row.cursor_id } : null;
  return { seen: row?.seen ?? 0, removed: row?.removed ?? 0, next };
}

/** Prunes one batch of dead and cancelled jobs past their queue's retention. */
export async function pruneTerminalBatch(
  db: Queryable,
  schema: string,
  limit: number,
): Promise<{ seen: number; removed: number }> {
  const rows = await run<{ seen: number; removed: number }>(db, TerminalJobPruneBatch(schema), [limit]);
  return { seen: rows[0]?.seen ?? 0, removed: rows[0]?.removed ?? 0 };
}
