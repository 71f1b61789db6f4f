import type { RateLimitStatsRow } from '../../storage/queues/rate-limits.js';

/** A limited queue's limits and how much they held its claims back (in `stats().queues[].throttle`). */
export interface ThrottleStats {
  /** The rate limit, or null. */
  rateLimit: { max: number; perMs: number; perKey: boolean } | null;
  /** The global concurrency limit, or null. */
  concurrencyLimit: number | null;
  /** Claims the limits cut short while claimable jobs waited, since the limit was first set. */
  throttledClaims: number;
  /** Time the queue's claims were told to wait, in ms: the union of those waits, not one per worker. */
  throttledMs: number;
  /** How long the last throttled claim's wait still runs (0: not throttled now). */
  throttledForMs: number;
  /** Starts inside the current window of a queue-wide rate limit; null per key or without one. */
  startsInWindow: number | null;
  /** Live leases held by the queue's limited claims (what `concurrencyLimit` counts). */
  liveLeases: number;
}

/** Turns a RateLimitStatsRead row into the public shape (a queue whose limits were cleared keeps its counters). */
export function toThrottleStats(row: RateLimitStatsRow): ThrottleStats {
  const rateLimit =
    row.rate_limit_max === null || row.rate_limit_per_ms === null
      ? null
      : { max: row.rate_limit_max, perMs: row.rate_limit_per_ms, perKey: row.rate_limit_per_key };
  return {
    rateLimit,
    concurrencyLimit: row.concurrency_limit,
    throttledClaims: row.throttled_claims,
    throttledMs: Math.round(row.throttled_ms),
    throttledForMs: Math.round(row.throttled_for_ms),
    startsInWindow: rateLimit === null || rateLimit.perKey ? null : row.starts_in_window,
    liveLeases: row.live_leases,
  };
}
