import { defineStatement, type Queryable, run } from '../db.js';

/**
 * JobAgePending: pending -> pending with a higher priority, for at most $2 jobs of queue $1 that
 * have waited long enough: a job's priority becomes base + least(cap, floor(waited / interval)),
 * where base is the priority it was enqueued with (kept in base_priority on the first raise) and
 * waited counts from available_at. Never lowers a priority.
 * Index-friendly: `levels` walks the distinct priorities of the queue's claimable jobs with one
 * max() probe each (a skip scan of jobs_claimable_idx); per level, the oldest jobs come first in the
 * same index, so each level reads only jobs older than one interval, oldest first, up to $2.
 * Rows are locked SKIP LOCKED (a claimer has them: they are leaving) and re-checked.
 */
export const JobAgePending = defineStatement(
  'age_pending_jobs',
  (s) => `
  WITH RECURSIVE cfg AS (
    SELECT aging_interval_ms::float8 AS step_ms, coalesce(aging_max_boost, 10) AS cap
    FROM ${s}.queues
    WHERE name = $1 AND aging_interval_ms IS NOT NULL
  ),
  levels AS (
    SELECT (SELECT max(priority) FROM ${s}.jobs
            WHERE queue_name = $1 AND status = 'pending' AND NOT awaits_predecessor AND waiting_parents = 0) AS p
    UNION ALL
    SELECT (SELECT max(priority) FROM ${s}.jobs
            WHERE queue_name = $1 AND status = 'pending' AND NOT awaits_predecessor AND waiting_parents = 0 AND priority < l.p)
    FROM levels AS l
    WHERE l.p IS NOT NULL
  ),
  due AS (
    SELECT d.id
    FROM levels AS l
    CROSS JOIN cfg
    CROSS JOIN LATERAL (
      SELECT j.id
      FROM ${s}.jobs AS j
      WHERE j.queue_name = $1 AND j.status = 'pending' AND NOT j.awaits_predecessor AND j.waiting_parents = 0
        AND j.priority = l.p
        AND j.available_at <= now() - cfg.step_ms * interval '1 millisecond'
        AND (j.base_priority IS NULL OR j.priority < j.base_priority + cfg.cap)
      ORDER BY j.available_at, j.id
      LIMIT $2
    ) AS d
    WHERE l.p IS NOT NULL
    LIMIT $2
  ),
  locked AS (
    SELECT j.id
    FROM ${s}.jobs AS j
    JOIN due USING (id)
    WHERE j.status = 'pending'
    FOR UPDATE OF j SKIP LOCKED
  ),
  raised AS (
    UPDATE ${s}.jobs AS j
    SET base_priority = coalesce(j.base_priority, j.priority),
        priority = coalesce(j.base_priority, j.priority)
                   + least(cfg.cap, floor(extract(epoch FROM now() - j.available_at) * 1000 / cfg.step_ms))::int
    FROM locked, cfg
    WHERE j.id = locked.id
      AND j.status = 'pending'
      AND coalesce(j.base_priority, j.priority)
          + least(cfg.cap, floor(extract(epoch FROM now() - j.available_at) * 1000 / cfg.step_ms))::int > j.priority
    RETURNING j.id
  )
  SELECT count(*)::int AS raised FROM raised`,
);

/**
 * FairnessPassProbe: what a fairness pass has to visit, in one read: the queues with aging turned
 * on (at most $1, by name) and whether any ordering key row exists. Reads the (small) queues table
 * and ordering_keys up to its first live row. A schema where nothing uses aging or ordering keys
 * then costs the pass this one statement a second, not three (the list and both key repairs, each
 * woken from idle on every worker).
 */
const FairnessPassProbe = defineStatement(
  'fairness_pass_probe',
  (s) => `
  SELECT ARRAY(SELECT name FROM ${s}.queues WHERE aging_interval_ms IS NOT NULL ORDER BY name LIMIT $1) AS aging,
         EXISTS (SELECT 1 FROM ${s}.ordering_keys) AS keyed`,
);

/** The queues with aging turned on (at most `limit`, by name), and whether any ordering key row exists. */
export async function probeFairnessWork(
  db: Queryable,
  schema: string,
  limit: number,
): Promise<{ agingQueues: string[]; orderingKeys: boolean }> {
  const rows = await run<{ aging: string[]; keyed: boolean }>(db, FairnessPassProbe(schema), [limit]);
  return { agingQueues: rows[0]?.aging ?? [], orderingKeys: rows[0]?.keyed === true };
}

/** Raises the priority of up to `limit` long-waiting pending jobs of `queue`; returns how many. */
export async function agePendingJobs(
  db: Queryable,
  schema: string,
  queue: string,
  limit: number,
): Promise<number> {
  const rows = await run<{ raised: number }>(db, JobAgePending(schema), [queue, limit]);
  return rows[0]?.raised ?? 0;
}
