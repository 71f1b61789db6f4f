/**
 * Every default of Leasehold's public options, in one place. Modules that used to define these
 * re-export them from here, so older imports keep working; limits (largest accepted values) stay
 * beside the validation that enforces them.
 */

/** The PostgreSQL schema holding Leasehold's tables. */
export const DEFAULT_SCHEMA = 'leasehold';
/** Connections in a pool Leasehold creates. */
export const DEFAULT_POOL_SIZE = 10;
/** Default retry backoff: the first retry within a second, none later than an hour. */
export const DEFAULT_BACKOFF: Readonly<{ baseMs: number; maxMs: number }> = {
  baseMs: 1000,
  maxMs: 3_600_000,
};
/**
 * Default lease length, for `lh.claim`, `lh.heartbeat` and workers alike: 30 s. Short enough that a
 * crashed holder's jobs come back within half a minute (the recovery sweep runs every second),
 * long enough that one missed renewal (workers renew well before expiry, a manual caller calls
 * `heartbeat`) does not lose the lease on a busy machine. Longer work renews; it never needs a
 * longer default.
 */
export const DEFAULT_LEASE_MS = 30_000;
/** Default attempts per job. */
export const DEFAULT_MAX_ATTEMPTS = 8;
/** Default priority of a job (higher runs first). */
export const DEFAULT_PRIORITY = 0;
/** Default upper bound on a payload's size once serialised to JSON. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024;
/** Default upper bound on a handler's result (its return value) once serialised to JSON: 64 KiB. */
export const DEFAULT_MAX_RESULT_BYTES = 64 * 1024;
/** Default upper bound on a `job.progress(detail)` detail once serialised to JSON: 8 KiB. */
export const DEFAULT_MAX_PROGRESS_BYTES = 8 * 1024;
/**
 * How often `lh.waitFor` reads the jobs waited on when no notification came: the fallback for a
 * lost notification, and the only way behind a transaction-mode pooler without a listen connection.
 */
export const DEFAULT_WAIT_POLL_INTERVAL_MS = 1000;
/** Window within which autocommit enqueues of one queue share a single wake-up notification. */
export const WAKEUP_WINDOW_MS = 3;
/** Jobs `lh.claim` takes when no `limit` is given. */
export const DEFAULT_CLAIM_LIMIT = 1;

/** Most expired leases one `recoverExpired()` call (or one sweep pass) moves. */
export const DEFAULT_RECOVERY_LIMIT = 100_000;
/** Mean interval of a worker's expired-lease recovery sweep (jittered by ±25%). */
export const DEFAULT_RECOVERY_INTERVAL_MS = 1000;

/** Succeeded jobs are kept this long by default (per queue: `configureQueue`'s `succeededRetentionMs`). */
export const DEFAULT_SUCCEEDED_RETENTION_MS = 3_600_000;
/** Mean interval between a worker's retention passes (jittered by ±25%). */
export const DEFAULT_PRUNE_INTERVAL_MS = 60_000;
/** Rows examined per pruning statement. */
export const DEFAULT_PRUNE_BATCH = 1000;
/** Most rows of each kind one pass removes; the next pass goes on. */
export const DEFAULT_PRUNE_LIMIT = 1_000_000;

/** Default mean interval between aging passes of a worker, in ms. */
export const DEFAULT_AGING_PASS_INTERVAL_MS = 1000;
/** Most jobs one aging pass raises per queue. */
export const DEFAULT_AGING_LIMIT = 1000;

/**
 * Mean interval between a worker's lane rotation passes (jittered by ±25%): a hot lane has ten
 * seconds to be emptied before it receives jobs again (migration 018), so a pass every 3 s gives it
 * about three chances.
 */
export const DEFAULT_LANE_ROTATION_INTERVAL_MS = 3000;

/** Mean interval between a worker's scheduler passes (jittered by ±25%): cron ticks fire within about this. */
export const DEFAULT_SCHEDULE_INTERVAL_MS = 1000;
/**
 * A schedule's due tick not fired within this long of its time was missed (no worker ran): the
 * schedule's `catchUp` decides whether it still runs. Ticks less late always fire.
 */
export const DEFAULT_SCHEDULE_LATE_AFTER_MS = 60_000;
/** Fired ticks kept per schedule as its jobs' "created by" history; older ones are pruned. */
export const DEFAULT_SCHEDULE_TICKS_KEPT = 10_000;
/** How often a worker prunes the tick rows of the schedules it fired. */
export const DEFAULT_SCHEDULE_TICK_PRUNE_INTERVAL_MS = 60_000;

/**
 * A queue is flagged unattended (`listQueues`, `stats`, `leasehold queues`, the dashboard) when its
 * oldest claimable job has waited longer than this and none of its jobs holds a live lease: a
 * worker serving it claims within its poll interval (1 s by default) whenever it has a free slot.
 */
export const DEFAULT_UNATTENDED_AFTER_MS = 60_000;

/** Defaults for worker and queue options. */
export const WORKER_DEFAULTS = {
  concurrency: 10,
  /** null: adaptive read-ahead (runtime/claim/claim-sizer.ts); a number is a fixed prefetch. */
  prefetch: null as number | null,
  leaseMs: DEFAULT_LEASE_MS,
  maxRuntimeMs: 15 * 60_000,
  // Renew while the handler runs: a healthy long handler is not killed by surprise (issue 13).
  renew: 'alive' as 'progress' | 'alive',
  unknownErrorAttempts: 3,
  weight: 1,
  pollIntervalMs: 1000,
  shutdownTimeoutMs: 10_000,
  recoveryIntervalMs: DEFAULT_RECOVERY_INTERVAL_MS,
  /** First-retry scale of jobs the sweep returns (capped by the client's `backoff.baseMs`). */
  recoveryBackoffBaseMs: 100,
  pruneIntervalMs: DEFAULT_PRUNE_INTERVAL_MS,
  agingPassIntervalMs: DEFAULT_AGING_PASS_INTERVAL_MS,
  scheduleIntervalMs: DEFAULT_SCHEDULE_INTERVAL_MS,
  laneRotationIntervalMs: DEFAULT_LANE_ROTATION_INTERVAL_MS,
  claimBatchSize: 500,
  outcomeBatchDelayMs: 0,
};

/** Defaults of `stats()` (re-exported by operations/stats.ts, where `StatsOptions` is). */
export const DEFAULT_STATS_OPTIONS: Readonly<{
  countCap: number;
  expiringWithinMs: number;
  windowMs: number;
  maxWindowRows: number;
  maxQueues: number;
  unattendedAfterMs: number;
}> = Object.freeze({
  countCap: 10_000,
  expiringWithinMs: 30_000,
  windowMs: 300_000,
  maxWindowRows: 10_000,
  maxQueues: 1_000,
  unattendedAfterMs: DEFAULT_UNATTENDED_AFTER_MS,
});
