import type pg from 'pg';
import { DEFAULT_STATS_OPTIONS as STATS_DEFAULTS } from '../../shared/defaults.js';
import { ValidationError } from '../../shared/errors.js';
import { optionalInt, rejectUnknownOptions } from '../../shared/validation.js';
import { inReadSnapshot } from '../../storage/jobs/history.js';
import {
  applyStatsPlannerSettings,
  readEventWindow,
  readFinishedWindow,
  readQueueStats,
  readRefusalCounts,
  type StatsBounds,
} from '../../storage/operator/stats.js';
import { readRateLimitStats } from '../../storage/queues/rate-limits.js';
import { type ThrottleStats, toThrottleStats } from './throttle-stats.js';
import { isUnattended } from './unattended.js';

/** Options of `stats()`; the defaults keep one call to a few milliseconds at a 1M-job backlog. */
export interface StatsOptions {
  /** Pending and dead jobs are counted exactly up to this many per queue (default 10,000). */
  countCap?: number;
  /** A running job whose lease ends within this many ms counts as near expiry (default 30 s). */
  expiringWithinMs?: number;
  /** Window of the transition and throughput counts, in ms (default 5 minutes). */
  windowMs?: number;
  /** At most this many recent events and completions are read for those counts (default 10,000). */
  maxWindowRows?: number;
  /** At most this many queues are reported (default 1,000). */
  maxQueues?: number;
  /** Claimable work older than this with no live lease flags its queue `unattended` (default 60 s). */
  unattendedAfterMs?: number;
}

/** Defaults of `stats()` (defined in shared/defaults.ts, which `import 'leasehold'` loads without this module). */
export const DEFAULT_STATS_OPTIONS: Readonly<Required<StatsOptions>> = STATS_DEFAULTS;

/** One queue's database-derived gauges. */
export interface QueueStats {
  queue: string;
  /** Pending jobs (claimable or scheduled), exact up to `countCap`; those in `waiting` are not included. */
  pending: number;
  /** Pending jobs held behind an earlier job of their ordering key, exact up to `countCap`. */
  waiting: number;
  /** True when `pending`, `waiting` or `dead` stopped at `countCap`: the queue holds at least that many. */
  capped: boolean;
  running: number;
  /** Running jobs whose lease ends within `expiringWithinMs`. */
  leasesExpiringSoon: number;
  /** Dead jobs awaiting an operator, exact up to `countCap`. */
  dead: number;
  /** How long the oldest claimable job has waited since it became claimable; null when none. */
  oldestClaimableAgeMs: number | null;
  /** How long ago the oldest unresolved dead job died; null when none. */
  oldestDeadAgeMs: number | null;
  paused: boolean;
  /** Claimable work has waited past `unattendedAfterMs` and no job holds a live lease: no worker is taking it. */
  unattended: boolean;
  /** Jobs completed within the window. */
  completedInWindow: number;
  /** The queue's rate and concurrency limits and how much they held claims back; null when it has none. */
  throttle: ThrottleStats | null;
}

/** Lost-fence attempts of one queue and operation, since the schema was created. */
export interface RefusalStat {
  queue: string;
  operation: string;
  count: number;
}

/** Transitions of one kind, queue and error code within the window. */
export interface TransitionStat {
  queue: string;
  /** `lease_expired` (recovery sweep), `retried` or `dead`. */
  kind: string;
  errorCode: string;
  count: number;
}

/** Durable steps (`job.step`) or sleeps (`job.sleep`) of one queue recorded within the window. */
export interface StepStat {
  queue: string;
  /** 'step' (a step's result recorded) or 'sleep' (a wake time recorded). */
  kind: string;
  count: number;
}

/** What `stats()` returns: one consistent snapshot. */
export interface LeaseholdStats {
  at: Date;
  windowMs: number;
  queues: QueueStats[];
  refusals: RefusalStat[];
  transitions: TransitionStat[];
  /**
   * Durable steps and sleeps recorded within the window, per queue (a refused step write is in
   * `refusals`, operation 'step'; a step that threw, in `transitions` as its attempt's retry or death).
   */
  steps: StepStat[];
  /** True when the window held more events or completions than `maxWindowRows`: counts are lower bounds. */
  windowTruncated: boolean;
}

/** Validates `stats()` options against the defaults. */
export function resolveStatsOptions(options: StatsOptions = {}): StatsBounds & { unattendedAfterMs: number } {
  if (typeof options !== 'object' || options === null)
    throw new ValidationError('options', 'must be an object');
  rejectUnknownOptions(options, Object.keys(DEFAULT_STATS_OPTIONS), 'options');
  const d = DEFAULT_STATS_OPTIONS;
  return {
    countCap: optionalInt(options.countCap, 'countCap', 1, 1_000_000, d.countCap),
    expiringWithinMs: optionalInt(
      options.expiringWithinMs,
      'expiringWithinMs',
      0,
      86_400_000,
      d.expiringWithinMs,
    ),
    windowMs: optionalInt(options.windowMs, 'windowMs', 1, 86_400_000, d.windowMs),
    maxWindowRows: optionalInt(options.maxWindowRows, 'maxWindowRows', 1, 1_000_000, d.maxWindowRows),
    maxQueues: optionalInt(options.maxQueues, 'maxQueues', 1, 100_000, d.maxQueues),
    unattendedAfterMs: optionalInt(
      options.unattendedAfterMs,
      'unattendedAfterMs',
      0,
      86_400_000,
      d.unattendedAfterMs,
    ),
  };
}

/**
 * Reads every gauge in one read-only transaction (repeatable read, so the parts agree). Every
 * statement is index-served and bounded: see storage/operator/stats.ts and docs/observability.md.
 */
export async function readStats(
  pool: pg.Pool,
  schema: string,
  options: StatsOptions = {},
): Promise<LeaseholdStats> {
  const bounds = resolveStatsOptions(options);
  return inReadSnapshot(pool, async (db) => {
    const at = await applyStatsPlannerSettings(db, schema);
    const queues = await readQueueStats(db, schema, bounds);
    const refusals = await readRefusalCounts(db, schema);
    const events = await readEventWindow(db, schema, bounds);
    const finished = await readFinishedWindow(db, schema, bounds);
    const limits = await readRateLimitStats(db, schema, bounds.maxQueues);
    const throttles = new Map(limits.map((row) => [row.queue_name, toThrottleStats(row)]));
    const completed = new Map(finished.map((row) => [row.queue_name, row.n]));
    const finishedTotal = finished.reduce((sum, row) => sum + row.n, 0);
    return {
      at,
      windowMs: bounds.windowMs,
      queues: queues.map((row) => ({
        queue: row.name,
        pending: row.pending,
        waiting: row.waiting,
        capped:
          row.pending >= bounds.countCap || row.waiting >= bounds.countCap || row.dead >= bounds.countCap,
        running: row.running,
        leasesExpiringSoon: row.expiring,
        dead: row.dead,
        oldestClaimableAgeMs: row.oldest_claimable_ms === null ? null : Math.max(0, row.oldest_claimable_ms),
        oldestDeadAgeMs: row.oldest_dead_ms === null ? null : Math.max(0, row.oldest_dead_ms),
        paused: row.paused,
        unattended: isUnattended(
          {
            paused: row.paused,
            oldestClaimableAgeMs: row.oldest_claimable_ms,
            liveLeases: row.live,
          },
          bounds.unattendedAfterMs,
        ),
        completedInWindow: completed.get(row.name) ?? 0,
        throttle: throttles.get(row.name) ?? null,
      })),
      refusals: refusals.map((row) => ({
        queue: row.queue_name,
        operation: row.operation,
        count: row.refused_count,
      })),
      transitions: events
        .filter((row) => row.kind !== 'step')
        .map((row) => ({ queue: row.queue_name, kind: row.kind, errorCode: row.error_code, count: row.n })),
      steps: events
        .filter((row) => row.kind === 'step')
        .map((row) => ({ queue: row.queue_name, kind: row.step_kind, count: row.n })),
      windowTruncated:
        (events[0]?.examined ?? 0) >= bounds.maxWindowRows || finishedTotal >= bounds.maxWindowRows,
    };
  });
}
