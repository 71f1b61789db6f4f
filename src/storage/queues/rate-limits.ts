import { defineStatement, type Queryable, run } from '../db.js';

/**
 * RateLimitStatsRead: per limited queue, its limits, the throttled counters its claims keep in the
 * rate_limits row (see claim/throttle.ts), whether a claim was last told to wait past now, the
 * starts inside the current window (queue-wide limits) and the live leases its claims hold
 * (jobs_queue_slots_idx). Read-only, no locks; at most $1 queues, by name.
 */
const RateLimitStatsRead = defineStatement(
  'rate_limit_stats',
  (s) => `
  SELECT r.queue_name,
         q.rate_limit_max, q.rate_limit_per_ms, coalesce(q.rate_limit_per_key, false) AS rate_limit_per_key,
         q.concurrency_limit,
         r.throttled_claims::float8 AS throttled_claims, r.throttled_ms,
         -- (PostgreSQL before 16 cannot subtract the initial '-infinity'.)
         CASE WHEN r.throttled_until > now()
              THEN extract(epoch FROM r.throttled_until - now()) * 1000 ELSE 0 END::float8 AS throttled_for_ms,
         (SELECT coalesce(sum(e.n), 0)::int
          FROM ${s}.rate_limit_keys AS k, unnest(k.start_at, k.start_n) AS e(at, n)
          WHERE k.queue_name = r.queue_name AND k.bucket_key = ''
            AND e.at > now() - q.rate_limit_per_ms::double precision * interval '1 millisecond')
           AS starts_in_window,
         (SELECT count(*)::int FROM ${s}.jobs AS j
          WHERE j.queue_name = r.queue_name AND j.status = 'running' AND j.holds_queue_slot
            AND j.lease_expires_at > now()) AS live_leases
  FROM ${s}.rate_limits AS r
  LEFT JOIN ${s}.queues AS q ON q.name = r.queue_name
  ORDER BY r.queue_name
  LIMIT $1`,
);

/** One limited queue's row as RateLimitStatsRead returns it. */
export interface RateLimitStatsRow {
  queue_name: string;
  rate_limit_max: number | null;
  rate_limit_per_ms: number | null;
  rate_limit_per_key: boolean;
  concurrency_limit: number | null;
  throttled_claims: number;
  throttled_ms: number;
  throttled_for_ms: number;
  starts_in_window: number | null;
  live_leases: number;
}

/** Reads the limiter state of up to `limit` limited queues. */
export function readRateLimitStats(
  db: Queryable,
  schema: string,
  limit: number,
): Promise<RateLimitStatsRow[]> {
  return run<RateLimitStatsRow>(db, RateLimitStatsRead(schema), [limit]);
}

/**
 * RateLimitKeyPruneBatch: removes the rate-limit windows (rate_limit_keys) that no longer limit
 * anything: every start in them is older than their queue's window, or the queue has no rate limit
 * any more. A per-key limit on a high-cardinality key (a user, a tenant) adds a row per key, which
 * nothing else removes. A removed row is what a claim of that key finds when it is first used: no
 * start in the window, so the next claim inserts a fresh row, exactly as for a new key.
 * Examines at most $1 rows after the key ($2 queue, $3 bucket), in primary-key order; locks the
 * rows it removes with SKIP LOCKED (a claim debiting a window holds its row: that row is in use and
 * is left alone), and a row a claim appended to after this statement's snapshot is re-checked on
 * its newest version before it is removed. Takes no queue lock.
 */
const RateLimitKeyPruneBatch = defineStatement(
  'prune_rate_limit_keys',
  (s) => `
  WITH examined AS (
    SELECT k.queue_name, k.bucket_key FROM ${s}.rate_limit_keys AS k
    WHERE (k.queue_name, k.bucket_key) > ($2::text, $3::text)
    ORDER BY k.queue_name, k.bucket_key
    LIMIT $1
  ),
  doomed AS (
    SELECT k.queue_name, k.bucket_key
    FROM ${s}.rate_limit_keys AS k
    JOIN examined AS e ON e.queue_name = k.queue_name AND e.bucket_key = k.bucket_key
    LEFT JOIN ${s}.queues AS q ON q.name = k.queue_name
    WHERE q.rate_limit_max IS NULL OR q.rate_limit_per_ms IS NULL
       OR k.start_at[array_upper(k.start_at, 1)] IS NULL
       OR k.start_at[array_upper(k.start_at, 1)]
            <= now() - q.rate_limit_per_ms::double precision * interval '1 millisecond'
    FOR UPDATE OF k SKIP LOCKED
  ),
  removed AS (
    DELETE FROM ${s}.rate_limit_keys AS k USING doomed AS d
    WHERE k.queue_name = d.queue_name AND k.bucket_key = d.bucket_key
    RETURNING 1
  ),
  last AS (
    SELECT queue_name, bucket_key FROM examined ORDER BY queue_name DESC, bucket_key DESC LIMIT 1
  )
  SELECT (SELECT count(*) FROM examined)::int AS seen,
         (SELECT count(*) FROM removed)::int AS removed,
         (SELECT queue_name FROM last) AS last_queue,
         (SELECT bucket_key FROM last) AS last_key`,
);

/** Where a pass over rate_limit_keys goes on from: the last key a batch examined. */
export interface RateLimitKeyCursor {
  queue: string;
  key: string;
}

/** Prunes one batch of spent rate-limit windows; `next` is null once the scan reached the end. */
export async function pruneRateLimitKeysBatch(
  db: Queryable,
  schema: string,
  limit: number,
  after: RateLimitKeyCursor | null,
): Promise<{ seen: number; removed: number; next: RateLimitKeyCursor | null }> {
  const rows = await run<{
    seen: number;
    removed: number;
    last_queue: string | null;
    last_key: string | null;
  }>(
    db,
    RateLimitKeyPruneBatch(schema),
    // The empty queue name sorts before every real one (queue names have at least one character).
    [limit, after?.queue ?? '', after?.key ?? ''],
  );
  const row = rows[0];
  const seen = row?.seen ?? 0;
  const next =
    seen >= limit && row?.last_queue != null && row.last_key != null
      ? { queue: row.last_queue, key: row.last_key }
      : null;
  return { seen, removed: row?.removed ?? 0, next };
}
