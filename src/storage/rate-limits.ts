import { defineStatement, type Queryable, run } from './db.js';

/**
 * RateLimitStatsRead: per limited queue, its limits, the throttled counters its claims keep in the
 * rate_limits row (see claim-throttled.ts), whether a claim was last told to wait past now, the
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
