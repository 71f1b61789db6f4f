import { defineStatement, type Queryable, run } from '../db.js';

// Bulk actions: removal of listed jobs, and the audit log of bulk actions (bulk_actions, 017).
// Replay and cancel of listed jobs live beside their single-job statements (replay.ts, cancel.ts).

/**
 * JobRemoveListed: dead, cancelled or succeeded -> (removed), for the listed ids, by an operator.
 * Live jobs are left alone (cancel them first), and so is a dead job that heads its ordering key
 * (removing it would silently unblock the key: replay or skip it). Each removed job takes its
 * events, effects and idempotency key with it and leaves a `removed` tombstone naming who removed
 * it and why. Locks with SKIP LOCKED; primary-key lookups on jobs and finished_jobs.
 */
const JobRemoveListed = defineStatement(
  'remove_listed',
  (s) => `
  WITH terminal AS (
    SELECT j.id
    FROM ${s}.jobs AS j
    WHERE j.id = ANY($1::bigint[]) AND j.finished_at IS NOT NULL
      AND NOT EXISTS (
        SELECT 1 FROM ${s}.ordering_keys AS k
        WHERE k.queue_name = j.queue_name AND k.ordering_key = j.ordering_key AND k.head_id = j.id)
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
  ),
  removed_terminal AS (
    DELETE FROM ${s}.jobs AS j
    USING terminal
    WHERE j.id = terminal.id AND j.status IN ('dead', 'cancelled') AND j.finished_at IS NOT NULL
    RETURNING j.id, j.queue_name, j.status::text AS status, j.attempt_count, j.max_attempts,
              j.last_error_code, j.created_at, j.finished_at
  ),
  finished AS (
    SELECT f.id FROM ${s}.finished_jobs AS f WHERE f.id = ANY($1::bigint[]) ORDER BY f.id FOR UPDATE SKIP LOCKED
  ),
  removed_finished AS (
    DELETE FROM ${s}.finished_jobs AS f
    USING finished
    WHERE f.id = finished.id
    RETURNING f.id, f.queue_name, 'succeeded' AS status, f.attempt_count, f.max_attempts,
              NULL::text AS last_error_code, f.created_at, f.finished_at
  ),
  removed AS (
    SELECT * FROM removed_terminal UNION ALL SELECT * FROM removed_finished
  ),
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
  gone_keys AS (
    DELETE FROM ${s}.job_keys AS k USING removed WHERE k.job_id = removed.id
  ),
  tombstones AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, attempt, error_code, actor, reason, detail)
    SELECT id, queue_name, 'removed', attempt_count, last_error_code, $2, $3,
           jsonb_build_object('status', status, 'createdAt', created_at, 'finishedAt', finished_at,
                              'maxAttempts', max_attempts)
    FROM removed
  )
  SELECT count(*)::int AS removed FROM removed`,
);

/** Removes the listed jobs that are dead, cancelled or succeeded; returns how many. */
export async function removeListed(
  db: Queryable,
  schema: string,
  ids: readonly string[],
  params: { actor: string | null; reason: string },
): Promise<number> {
  const rows = await run<{ removed: number }>(db, JobRemoveListed(schema), [
    ids,
    params.actor,
    params.reason,
  ]);
  return rows[0]?.removed ?? 0;
}

/** BulkActionStart: records a bulk action about to run (the audit log). Insert only. */
const BulkActionStart = defineStatement(
  'bulk_action_start',
  (s) => `
  INSERT INTO ${s}.bulk_actions (action, filter, actor, reason, matched)
  VALUES ($1, $2, $3, $4, $5)
  RETURNING id::text`,
);

/** BulkActionProgress: how many jobs it has changed so far, and its state. Primary-key update. */
const BulkActionProgress = defineStatement(
  'bulk_action_progress',
  (s) => `
  UPDATE ${s}.bulk_actions
  SET done = $2, state = $3, error = $4, updated_at = now(),
      finished_at = CASE WHEN $3 = 'running' THEN NULL ELSE now() END
  WHERE id = $1`,
);

/** BulkActionList: bulk actions, newest first, one by id ($1) or the latest $2. Primary key. */
const BulkActionList = defineStatement(
  'bulk_action_list',
  (s) => `
  SELECT id::text, action, filter, actor, reason, matched, done, state, error, started_at, updated_at,
         finished_at
  FROM ${s}.bulk_actions
  WHERE $1::bigint IS NULL OR id = $1
  ORDER BY id DESC
  LIMIT $2`,
);

/** A bulk_actions row. */
export interface BulkActionRow {
  id: string;
  action: 'replay' | 'cancel' | 'remove';
  filter: Record<string, unknown>;
  actor: string | null;
  reason: string;
  matched: number;
  done: number;
  state: 'running' | 'finished' | 'failed';
  error: string | null;
  started_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

/** Records the start of a bulk action; returns its id. */
export async function startBulkAction(
  db: Queryable,
  schema: string,
  row: { action: string; filter: unknown; actor: string | null; reason: string; matched: number },
): Promise<string> {
  const rows = await run<{ id: string }>(db, BulkActionStart(schema), [
    row.action,
    JSON.stringify(row.filter),
    row.actor,
    row.reason,
    row.matched,
  ]);
  return (rows[0] as { id: string }).id;
}

/** Records a bulk action's progress (or its end). */
export async function recordBulkProgress(
  db: Queryable,
  schema: string,
  id: string,
  done: number,
  state: 'running' | 'finished' | 'failed',
  error: string | null = null,
): Promise<void> {
  await run(db, BulkActionProgress(schema), [id, done, state, error]);
}

/** Reads one bulk action (by id) or the latest `limit`. */
export function listBulkActions(
  db: Queryable,
  schema: string,
  id: string | null,
  limit: number,
): Promise<BulkActionRow[]> {
  return run<BulkActionRow>(db, BulkActionList(schema), [id, limit]);
}
