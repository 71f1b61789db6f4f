import { defineStatement, type Queryable, run } from '../db.js';

/**
 * MetricsRollupWrite: recomputes the per-queue, per-minute counts of the last $1 minutes (the
 * current one included) and stores them in metrics_rollup, with the gauges sampled now ($3, a JSON
 * array, written to the current minute). Completions come from finished_jobs (the newest $2 within
 * the window, finished_jobs_finished_at_idx backwards); retries, deaths and lease expirations from
 * the newest $2 job_events (primary key backwards, as lh.stats() reads them). When a read stopped
 * at its cap, only the minutes it covered in full are written, so a capped read never lowers a
 * count written earlier. Upsert on the primary key; a later pass overwrites its minutes (so jobs
 * committed late are counted). Never runs on the hot path: a maintenance pass calls it.
 */
const MetricsRollupWrite = defineStatement(
  'metrics_rollup_write',
  (s) => `
  WITH bounds AS (
    SELECT date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute' AS from_minute
  ),
  finished AS (
    SELECT f.queue_name, f.finished_at
    FROM ${s}.finished_jobs AS f, bounds
    WHERE f.finished_at >= bounds.from_minute
    ORDER BY f.finished_at DESC
    LIMIT $2
  ),
  recent AS (
    SELECT e.queue_name, e.kind, e.error_code, e.at
    FROM ${s}.job_events AS e
    ORDER BY e.id DESC
    LIMIT $2
  ),
  covered AS (
    SELECT greatest(
      bounds.from_minute,
      CASE WHEN (SELECT count(*) FROM finished) >= $2
           THEN date_trunc('minute', (SELECT min(finished_at) FROM finished)) + interval '1 minute' END,
      CASE WHEN (SELECT count(*) FROM recent) >= $2
           THEN date_trunc('minute', (SELECT min(at) FROM recent)) + interval '1 minute' END
    ) AS from_minute
    FROM bounds
  ),
  completions AS (
    SELECT queue_name, date_trunc('minute', finished_at) AS minute, count(*)::int AS n
    FROM finished GROUP BY 1, 2
  ),
  events AS (
    SELECT queue_name, date_trunc('minute', at) AS minute,
           count(*) FILTER (WHERE kind = 'retried')::int AS retried,
           count(*) FILTER (WHERE kind = 'dead')::int AS dead,
           count(*) FILTER (WHERE kind = 'lease_expired')::int AS lease_expired
    FROM recent, bounds
    WHERE at >= bounds.from_minute AND kind IN ('retried', 'dead', 'lease_expired')
    GROUP BY 1, 2
  ),
  codes AS (
    SELECT queue_name, minute, jsonb_object_agg(code, n) AS by_code
    FROM (
      SELECT queue_name, date_trunc('minute', at) AS minute, coalesce(error_code, '(none)') AS code,
             count(*)::int AS n,
             row_number() OVER (PARTITION BY queue_name, date_trunc('minute', at) ORDER BY count(*) DESC) AS rank
      FROM recent, bounds
      WHERE at >= bounds.from_minute AND kind = 'retried'
      GROUP BY 1, 2, 3
    ) AS ranked
    WHERE rank <= 20
    GROUP BY 1, 2
  ),
  gauges AS (
    SELECT * FROM jsonb_to_recordset($3::jsonb) AS g(queue text, pending int, running int,
           near_expiry int, oldest_claimable_ms double precision, refused_total bigint)
  ),
  cells AS (
    SELECT queue_name, minute FROM completions
    UNION SELECT queue_name, minute FROM events
    UNION SELECT queue, date_trunc('minute', now()) FROM gauges
  )
  INSERT INTO ${s}.metrics_rollup AS m (queue_name, minute, completed, retried, dead, lease_expired,
                                        retries_by_code, refused_total, pending, running, near_expiry,
                                        oldest_claimable_ms)
  SELECT c.queue_name, c.minute, coalesce(co.n, 0), coalesce(e.retried, 0), coalesce(e.dead, 0),
         coalesce(e.lease_expired, 0), coalesce(cd.by_code, '{}'), g.refused_total, g.pending, g.running,
         g.near_expiry, g.oldest_claimable_ms
  FROM cells AS c
  CROSS JOIN covered
  LEFT JOIN completions AS co ON co.queue_name = c.queue_name AND co.minute = c.minute
  LEFT JOIN events AS e ON e.queue_name = c.queue_name AND e.minute = c.minute
  LEFT JOIN codes AS cd ON cd.queue_name = c.queue_name AND cd.minute = c.minute
  LEFT JOIN gauges AS g ON g.queue = c.queue_name AND c.minute = date_trunc('minute', now())
  WHERE c.minute >= covered.from_minute
  ON CONFLICT (queue_name, minute) DO UPDATE
    SET completed = excluded.completed, retried = excluded.retried, dead = excluded.dead,
        lease_expired = excluded.lease_expired, retries_by_code = excluded.retries_by_code,
        refused_total = coalesce(excluded.refused_total, m.refused_total),
        pending = coalesce(excluded.pending, m.pending), running = coalesce(excluded.running, m.running),
        near_expiry = coalesce(excluded.near_expiry, m.near_expiry),
        oldest_claimable_ms = coalesce(excluded.oldest_claimable_ms, m.oldest_claimable_ms)
  RETURNING 1`,
);

/** MetricsRollupPrune: removes rollup rows older than $1 hours (metrics_rollup_minute_idx). */
const MetricsRollupPrune = defineStatement(
  'metrics_rollup_prune',
  (s) => `DELETE FROM ${s}.metrics_rollup WHERE minute < now() - $1::int * interval '1 hour'`,
);

/**
 * MetricsRollupRead: the rollup rows of the last $1 minutes, of queue $2 (null: every queue), by
 * queue and minute; at most $3 rows. Primary key or metrics_rollup_minute_idx.
 */
const MetricsRollupRead = defineStatement(
  'metrics_rollup_read',
  (s) => `
  SELECT queue_name, (extract(epoch FROM minute) * 1000)::float8 AS minute_ms, completed, retried, dead,
         lease_expired, retries_by_code, refused_total::float8 AS refused_total, pending, running,
         near_expiry, oldest_claimable_ms
  FROM ${s}.metrics_rollup
  WHERE minute >= date_trunc('minute', now()) - ($1::int - 1) * interval '1 minute'
    AND ($2::text IS NULL OR queue_name = $2)
  ORDER BY queue_name, minute
  LIMIT $3`,
);

/** The gauges sampled for one queue. */
export interface RollupGauges {
  queue: string;
  pending: number;
  running: number;
  near_expiry: number;
  oldest_claimable_ms: number | null;
  refused_total: number;
}

/** A rollup row as read. */
export interface RollupRow {
  queue_name: string;
  minute_ms: number;
  completed: number;
  retried: number;
  dead: number;
  lease_expired: number;
  retries_by_code: Record<string, number>;
  refused_total: number | null;
  pending: number | null;
  running: number | null;
  near_expiry: number | null;
  oldest_claimable_ms: number | null;
}

/** Recomputes the last `minutes` minutes and stores the gauges; returns the rows written. */
export async function writeRollup(
  db: Queryable,
  schema: string,
  minutes: number,
  maxRows: number,
  gauges: readonly RollupGauges[],
): Promise<number> {
  const rows = await run(db, MetricsRollupWrite(schema), [minutes, maxRows, JSON.stringify(gauges)]);
  return rows.length;
}

/** Removes rollup rows older than `hours`. */
export async function pruneRollup(db: Queryable, schema: string, hours: number): Promise<void> {
  await run(db, MetricsRollupPrune(schema), [hours]);
}

/** Reads the last `minutes` minutes of rollup rows. */
export function readRollup(
  db: Queryable,
  schema: string,
  minutes: number,
  queue: string | null,
  limit: number,
): Promise<RollupRow[]> {
  return run<RollupRow>(db, MetricsRollupRead(schema), [minutes, queue, limit]);
}
