import { defineStatement, type Queryable, run } from '../db.js';
import { finishedQueueNamesCte } from '../queues/known-queues.js';

/**
 * QueueStatsRead: per queue, the gauges a dashboard or a metrics scrape polls every few seconds.
 * Read-only, no locks. Every part is served by an index and bounded, so its cost does not grow with
 * the backlog (see docs/observability.md for the plan at a 1M-job backlog):
 * - queue names: a loose index scan (one probe per distinct queue) of jobs_claimable_idx for
 *   pending work and of jobs_terminal_queue_idx for dead and cancelled jobs, plus the running rows
 *   (jobs_expired_lease_idx; as many as the workers' slots), a loose scan of finished_jobs_queue_idx
 *   (a drained queue's succeeded records) and the queues table (every known queue: see
 *   known-queues.ts), so a drained queue stays listed with zeros; at most $1 names;
 * - pending and dead counts: counted exactly up to $2 per queue through those indexes, so a queue
 *   with a larger backlog reports the cap and `capped` (an exact count would read every entry);
 *   pending jobs held behind an earlier job of their ordering key (`awaits_predecessor`, not in
 *   jobs_claimable_idx) are counted apart, through jobs_ordering_waiting_idx;
 * - the oldest claimable job: jobs_claimable_idx orders by priority before available_at, so it
 *   takes the first entry of each distinct priority (a loose scan again) and the least of those;
 * - running jobs and those whose lease ends within $3 ms: the running rows only;
 * - dead jobs: counted (capped) and the oldest one found in jobs_dead_queue_idx (migration 004),
 *   index-only.
 */
const QueueStatsRead = defineStatement(
  'read_queue_stats',
  (s) => `
  WITH RECURSIVE pending_names AS (
    (SELECT queue_name FROM ${s}.jobs WHERE status = 'pending' AND NOT awaits_predecessor AND waiting_parents = 0 ORDER BY queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue_name FROM ${s}.jobs AS j
            WHERE j.status = 'pending' AND NOT j.awaits_predecessor AND j.waiting_parents = 0 AND j.queue_name > p.queue_name
            ORDER BY j.queue_name LIMIT 1)
    FROM pending_names AS p
    WHERE p.queue_name IS NOT NULL
  ),
  terminal_names AS (
    (SELECT queue_name FROM ${s}.jobs WHERE finished_at IS NOT NULL ORDER BY queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue_name FROM ${s}.jobs AS j
            WHERE j.finished_at IS NOT NULL AND j.queue_name > t.queue_name
            ORDER BY j.queue_name LIMIT 1)
    FROM terminal_names AS t
    WHERE t.queue_name IS NOT NULL
  ),
  ${finishedQueueNamesCte(s)},
  running AS (
    SELECT queue_name,
           count(*)::int AS running,
           count(*) FILTER (WHERE lease_expires_at > now())::int AS live,
           count(*) FILTER (
             WHERE lease_expires_at <= now() + $3::double precision * interval '1 millisecond')::int AS expiring
    FROM ${s}.jobs
    WHERE status = 'running'
    GROUP BY queue_name
  ),
  names AS (
    SELECT queue_name AS name FROM pending_names WHERE queue_name IS NOT NULL
    UNION SELECT queue_name FROM terminal_names WHERE queue_name IS NOT NULL
    UNION SELECT queue_name FROM finished_names WHERE queue_name IS NOT NULL
    UNION SELECT queue_name FROM running
    UNION SELECT name FROM ${s}.queues
    ORDER BY 1
    LIMIT $1
  )
  SELECT n.name,
         (SELECT count(*)::int FROM (
            SELECT 1 FROM ${s}.jobs AS j
            WHERE j.queue_name = n.name AND j.status = 'pending' AND NOT j.awaits_predecessor AND j.waiting_parents = 0 LIMIT $2
          ) AS capped) AS pending,
         (SELECT count(*)::int FROM (
            SELECT 1 FROM ${s}.jobs AS j WHERE j.queue_name = n.name AND j.awaits_predecessor LIMIT $2
          ) AS capped) AS waiting,
         coalesce(r.running, 0) AS running,
         coalesce(r.expiring, 0) AS expiring,
         coalesce(r.live, 0) AS live,
         (SELECT count(*)::int FROM (
            SELECT 1 FROM ${s}.jobs AS j WHERE j.queue_name = n.name AND j.status = 'dead' LIMIT $2
          ) AS capped) AS dead,
         (SELECT extract(epoch FROM now() - min(first.available_at)) * 1000
          FROM (
            WITH RECURSIVE priorities AS (
              (SELECT j.priority FROM ${s}.jobs AS j
               WHERE j.queue_name = n.name AND j.status = 'pending' AND NOT j.awaits_predecessor AND j.waiting_parents = 0
               ORDER BY j.priority DESC LIMIT 1)
              UNION ALL
              SELECT (SELECT j.priority FROM ${s}.jobs AS j
                      WHERE j.queue_name = n.name AND j.status = 'pending' AND NOT j.awaits_predecessor AND j.waiting_parents = 0 AND j.priority < p.priority
                      ORDER BY j.priority DESC LIMIT 1)
              FROM priorities AS p
              WHERE p.priority IS NOT NULL
            )
            SELECT (SELECT j.available_at FROM ${s}.jobs AS j
                    WHERE j.queue_name = n.name AND j.status = 'pending' AND NOT j.awaits_predecessor AND j.waiting_parents = 0 AND j.priority = p.priority
                    ORDER BY j.available_at LIMIT 1) AS available_at
            FROM priorities AS p
            WHERE p.priority IS NOT NULL
          ) AS first
          HAVING min(first.available_at) <= now())::float8 AS oldest_claimable_ms,
         (SELECT extract(epoch FROM now() - j.finished_at) * 1000
          FROM ${s}.jobs AS j
          WHERE j.queue_name = n.name AND j.status = 'dead'
          ORDER BY j.finished_at LIMIT 1)::float8 AS oldest_dead_ms,
         coalesce(q.paused, false) AS paused
  FROM names AS n
  LEFT JOIN running AS r ON r.queue_name = n.name
  LEFT JOIN ${s}.queues AS q ON q.name = n.name
  ORDER BY n.name`,
);

/**
 * RefusalCountRead: lost-fence attempts per queue and operation, as counted by the fenced
 * statements. The table has one row per (queue, operation), so it is read whole.
 */
const RefusalCountRead = defineStatement(
  'read_refusal_counts',
  (s) => `
  SELECT queue_name, operation, refused_count::float8 AS refused_count
  FROM ${s}.lease_refusals
  ORDER BY queue_name, operation`,
);

/**
 * JobEventWindowRead: recent transitions by queue, kind and error code: lease expirations (from the
 * recovery sweep), retries and deaths within the last $1 ms, and the durable steps recorded
 * (`step` events, by `step_kind`: 'step' or 'sleep'). job_events has no index on time, so it
 * reads the newest $2 events backwards through the primary key (ids follow insertion order) and
 * stops there: `examined` equal to $2 means the window held more events than were counted.
 */
const JobEventWindowRead = defineStatement(
  'read_event_window',
  (s) => `
  WITH recent AS (
    SELECT queue_name, kind, error_code, at, CASE WHEN kind = 'step' THEN detail->>'kind' END AS step_kind
    FROM ${s}.job_events
    ORDER BY id DESC
    LIMIT $2
  )
  SELECT queue_name, kind, coalesce(error_code, '') AS error_code, coalesce(step_kind, '') AS step_kind,
         count(*)::int AS n, (SELECT count(*)::int FROM recent) AS examined
  FROM recent
  WHERE at >= now() - $1::double precision * interval '1 millisecond'
    AND kind IN ('lease_expired', 'retried', 'dead', 'step')
  GROUP BY queue_name, kind, error_code, step_kind
  ORDER BY queue_name, kind, error_code, step_kind`,
);

/**
 * FinishedJobWindowRead: jobs completed within the last $1 ms, per queue, from the newest $2 rows
 * of finished_jobs_finished_at_idx: throughput, bounded like the event window.
 */
const FinishedJobWindowRead = defineStatement(
  'read_finished_window',
  (s) => `
  WITH recent AS (
    SELECT queue_name
    FROM ${s}.finished_jobs
    WHERE finished_at >= now() - $1::double precision * interval '1 millisecond'
    ORDER BY finished_at DESC
    LIMIT $2
  )
  SELECT queue_name, count(*)::int AS n FROM recent GROUP BY queue_name ORDER BY queue_name`,
);

/** One queue's row as QueueStatsRead returns it. */
export interface QueueStatsRow {
  name: string;
  pending: number;
  waiting: number;
  running: number;
  expiring: number;
  /** Running jobs whose lease has not expired. */
  live: number;
  dead: number;
  oldest_claimable_ms: number | null;
  oldest_dead_ms: number | null;
  paused: boolean;
}

/** Bounds of one stats read. */
export interface StatsBounds {
  maxQueues: number;
  countCap: number;
  expiringWithinMs: number;
  windowMs: number;
  maxWindowRows: number;
}

/** Reads the per-queue gauges. */
export function readQueueStats(db: Queryable, schema: string, bounds: StatsBounds): Promise<QueueStatsRow[]> {
  return run<QueueStatsRow>(db, QueueStatsRead(schema), [
    bounds.maxQueues,
    bounds.countCap,
    bounds.expiringWithinMs,
  ]);
}

/** Reads lost-fence counts. */
export function readRefusalCounts(
  db: Queryable,
  schema: string,
): Promise<{ queue_name: string; operation: string; refused_count: number }[]> {
  return run(db, RefusalCountRead(schema), []);
}

/** Reads recent transition and recorded-step counts from the audit trail. */
export function readEventWindow(
  db: Queryable,
  schema: string,
  bounds: StatsBounds,
): Promise<
  { queue_name: string; kind: string; error_code: string; step_kind: string; n: number; examined: number }[]
> {
  return run(db, JobEventWindowRead(schema), [bounds.windowMs, bounds.maxWindowRows]);
}

/** Reads recent completions per queue. */
export function readFinishedWindow(
  db: Queryable,
  schema: string,
  bounds: StatsBounds,
): Promise<{ queue_name: string; n: number }[]> {
  return run(db, FinishedJobWindowRead(schema), [bounds.windowMs, bounds.maxWindowRows]);
}

/**
 * StatsPlannerSettings: turns JIT off for the stats transaction only. The loose index scans and
 * capped counts are cheap, but the planner's estimates for them are large enough to trigger JIT
 * compilation, which costs far more (hundreds of ms) than running the plan (milliseconds).
 */
const StatsPlannerSettings = defineStatement(
  'stats_planner_settings',
  () => `SELECT set_config('jit', 'off', true), now() AS at`,
);

/** Applies StatsPlannerSettings inside the caller's transaction; returns the snapshot's time. */
export async function applyStatsPlannerSettings(db: Queryable, schema: string): Promise<Date> {
  const rows = await run<{ at: Date }>(db, StatsPlannerSettings(schema), []);
  return rows[0]?.at ?? new Date();
}
