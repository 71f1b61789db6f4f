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
  constructor(private readonly options: RecoveryServiceOptions) {
    super(options.intervalMs, options.onError);
  }

  /** Runs one pass now. */
  override async runOnce(): Promise<RecoveryResult> {
    const result = await this.options.recover();
    if (result.retried + result.dead > 0) this.options.onRecovered?.(result);
    return result;
  }
}
