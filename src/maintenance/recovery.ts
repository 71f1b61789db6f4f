import { PeriodicService } from './periodic-service.js';

/** What one recovery pass moved. */
export interface RecoveryResult {
  /** Expired leases returned to `pending`. */
  retried: number;
  /** Expired leases whose attempts were spent, now `dead`. */
  dead: number;
}

/** Options of the recovery service. */
export interface RecoveryServiceOptions {
  /** Mean interval between passes, in ms; each wait is jittered by ±25%. */
  intervalMs: number;
  /** One pass: recover expired leases in bounded batches. */
  recover: () => Promise<RecoveryResult>;
  /**
   * Milliseconds until the next running lease lapses (database time), null when none runs: the
   * next pass comes then, if sooner than the interval. Unset: every pass waits the interval.
   */
  nextLapseInMs?: () => Promise<number | null>;
  /** Called after a pass that moved something. */
  onRecovered?: (result: RecoveryResult) => void;
  /** Called when a pass fails; the service keeps going. */
  onError?: (err: unknown) => void;
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

  /** Runs one pass now, then reads when the next lease lapses. */
  override async runOnce(): Promise<RecoveryResult> {
    this.#nextLapseInMs = null;
    this.#passes++;
    const result = await this.options.recover();
    if (result.retried + result.dead > 0) this.options.onRecovered?.(result);
    if (this.options.nextLapseInMs) this.#nextLapseInMs = await this.options.nextLapseInMs();
    return result;
  }

  /**
   * The jittered interval, or sooner: just after the next running lease lapses, so that a crashed
   * worker's leases are swept as they lapse rather than up to an interval later (measured: the
   * first sweep came 0.1–0.6 s after the lapse at the default 1 s interval). Never sooner than a
   * tenth of the interval (at least 10 ms), so leases that are renewed just in time cannot make the
   * sweep spin; the 5–20 ms added spreads the sweeps of many workers waiting for the same lapse.
   */
  protected override nextWaitMs(): number {
    // The first pass comes at once (within 50 ms): a worker that starts after a crash sweeps, and
    // learns when the next lease lapses, without waiting an interval.
    if (this.#passes === 0 && this.options.nextLapseInMs) return Math.random() * 50;
    const interval = super.nextWaitMs();
    const lapse = this.#nextLapseInMs;
    if (lapse === null) return interval;
    const floor = Math.max(10, this.options.intervalMs / 10);
    return Math.min(interval, Math.max(floor, lapse + 5 + Math.random() * 15));
  }
}

/** Batch sizes of one sweep pass: the first small, so the first jobs are back at once, then larger. */
export const SWEEP_BATCHES = { first: 1000, largest: 4000, limit: 100_000 };

/**
 * One sweep pass in batches that double from `first` to `largest` (each its own statement and
 * transaction), until a batch comes back short or `limit` leases were moved. After a crash, most
 * of a pass's time went into waiting for a pool connection behind the claims and completions that
 * its previous batch set off (10 batches of 1,000: 0.27 s alone, 1.3–1.7 s beside a busy
 * survivor); fewer, larger statements wait fewer times, and the first batch stays small so that
 * the first recovered jobs are claimable as soon as before.
 */
export async function sweepInGrowingBatches(
  recoverBatch: (limit: number) => Promise<RecoveryResult>,
  sizes: { first: number; largest: number; limit: number } = SWEEP_BATCHES,
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
