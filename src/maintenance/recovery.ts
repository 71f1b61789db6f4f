import { DEFAULT_RECOVERY_LIMIT } from '../shared/defaults.js';
import { MAX_BATCH } from '../shared/validation.js';
import type { Queryable } from '../storage/db.js';
import { msUntilNextLeaseExpiry, probeLeaseLapses, recoverExpiredLeases } from '../storage/leases/recover.js';
import { type MaintenanceServiceOptions, PeriodicService } from './periodic-service.js';

/** What one recovery pass moved. */
export interface RecoveryResult {
  /** Expired leases returned to `pending`. */
  retried: number;
  /** Expired leases whose attempts were spent, now `dead`. */
  dead: number;
}

/** Settings of one recovery pass, validated by the caller. */
export interface RecoveryPassOptions {
  /** Retry backoff of the leases returned to `pending`. */
  backoff: { baseMs: number; maxMs: number };
  /** Leases in the first statement (default 1000), each statement its own short transaction. */
  batchSize?: number;
  /** Batches double after each full one, up to this many leases (default: `batchSize`, fixed). */
  largestBatch?: number;
  /** Most leases this pass moves (default 100,000). */
  limit?: number;
}

/** Batch sizes of a worker's sweep pass: the first small, so the first jobs are back at once, then larger. */
export const SWEEP_BATCHES = { first: 1000, largest: 4000 } as const;

/**
 * One recovery pass: returns expired leases to `pending` (after backoff) or `dead` (attempts
 * spent), in batches (each its own statement and short transaction) that start at `batchSize` and
 * double up to `largestBatch`, until a batch comes back short or `limit` jobs were moved. A worker's
 * sweep grows its batches: after a crash, most of a pass's time went into waiting for a pool
 * connection behind the claims and completions its previous batch set off (10 batches of 1,000:
 * 0.27 s alone, 1.3–1.7 s beside a busy survivor), and fewer, larger statements wait fewer times.
 * `maxDelayMs` is the longest backoff a returned job was given.
 */
export async function recoveryPass(
  db: Queryable,
  schema: string,
  options: RecoveryPassOptions,
): Promise<RecoveryResult & { maxDelayMs: number }> {
  const first = options.batchSize ?? MAX_BATCH;
  let maxDelayMs = 0;
  const moved = await sweepInGrowingBatches(
    async (limit) => {
      const batch = await recoverExpiredLeases(db, schema, { limit, ...options.backoff });
      maxDelayMs = Math.max(maxDelayMs, batch.maxDelayMs);
      return batch;
    },
    {
      first,
      largest: Math.max(first, options.largestBatch ?? first),
      limit: options.limit ?? DEFAULT_RECOVERY_LIMIT,
    },
  );
  return { ...moved, maxDelayMs };
}

/**
 * Runs `recoverBatch` with batch sizes that double from `first` to `largest` after each full
 * batch, until one comes back short or `limit` leases were moved.
 */
export async function sweepInGrowingBatches(
  recoverBatch: (limit: number) => Promise<RecoveryResult>,
  sizes: { first: number; largest: number; limit: number } = {
    ...SWEEP_BATCHES,
    limit: DEFAULT_RECOVERY_LIMIT,
  },
): Promise<RecoveryResult> {
  const total = { retried: 0, dead: 0 };
  let batch = sizes.first;
  while (total.retried + total.dead < sizes.limit) {
    const asked = Math.min(batch, sizes.limit - total.retried - total.dead);
    const moved = await recoverBatch(asked);
    total.retried += moved.retried;
    total.dead += moved.dead;
    if (moved.retried + moved.dead < asked) break;
    batch = Math.min(batch * 2, sizes.largest);
  }
  return total;
}

/** Options of the recovery service. */
export interface RecoveryServiceOptions extends MaintenanceServiceOptions, RecoveryPassOptions {
  /**
   * After each pass, read when the next running lease lapses (database time) and run the next pass
   * just after it, if sooner than the interval; the first pass then comes at once.
   */
  followLapses?: boolean;
  /** Called after a pass that moved something, with the longest backoff a returned job got. */
  onRecovered?: (result: RecoveryResult, dueInMs: number) => void;
}

/**
 * The wait before the next sweep: the jittered interval, or sooner, just after the next running
 * lease lapses, so that a crashed worker's leases are swept as they lapse rather than up to an
 * interval later (measured: the first sweep came 0.1–0.6 s after the lapse at the default 1 s
 * interval). The first pass comes at once (within 50 ms): a worker that starts after a crash
 * sweeps, and learns when the next lease lapses, without waiting an interval. Never sooner than a
 * tenth of the interval (at least 10 ms), so leases renewed just in time cannot make the sweep
 * spin; the 5–20 ms added spreads the sweeps of many workers waiting for the same lapse.
 */
export function nextSweepWaitMs(state: {
  passes: number;
  intervalMs: number;
  jitteredIntervalMs: number;
  nextLapseInMs: number | null;
}): number {
  if (state.passes === 0) return Math.random() * 50;
  if (state.nextLapseInMs === null) return state.jitteredIntervalMs;
  const floor = Math.max(10, state.intervalMs / 10);
  return Math.min(state.jitteredIntervalMs, Math.max(floor, state.nextLapseInMs + 5 + Math.random() * 15));
}

/**
 * Runs the expired-lease recovery sweep on a jittered timer. Every worker process runs one:
 * the sweep's statement takes rows with SKIP LOCKED and re-checks expiry, so concurrent sweeps
 * neither collide nor touch renewed or completed jobs, and no leader is needed. The jitter keeps
 * many processes from sweeping in lockstep.
 */
export class RecoveryService extends PeriodicService<RecoveryResult> {
  #nextLapseInMs: number | null = null;
  #passes = 0;

  constructor(private readonly options: RecoveryServiceOptions) {
    super(options.intervalMs, options.onError);
  }

  /**
   * Runs one pass now, then (with `followLapses`) reads when the next lease lapses. With
   * `followLapses`, a pass first probes for a lapsed lease (probeLeaseLapses) and, finding none,
   * sweeps nothing: the probe's answer also says when the next lease lapses.
   */
  override async runOnce(): Promise<RecoveryResult> {
    const { db, schema } = this.options;
    this.#nextLapseInMs = null;
    this.#passes++;
    if (this.options.followLapses) {
      const probe = await probeLeaseLapses(db, schema);
      if (!probe.lapsed) {
        this.#nextLapseInMs = probe.nextLapseInMs;
        return { retried: 0, dead: 0 };
      }
    }
    const { maxDelayMs, ...result } = await recoveryPass(db, schema, this.options);
    if (result.retried + result.dead > 0) this.options.onRecovered?.(result, maxDelayMs);
    if (this.options.followLapses) this.#nextLapseInMs = await msUntilNextLeaseExpiry(db, schema);
    return result;
  }

  protected override nextWaitMs(): number {
    const jitteredIntervalMs = super.nextWaitMs();
    if (!this.options.followLapses) return jitteredIntervalMs;
    return nextSweepWaitMs({
      passes: this.#passes,
      intervalMs: this.options.intervalMs,
      jitteredIntervalMs,
      nextLapseInMs: this.#nextLapseInMs,
    });
  }
}
