import { DEFAULT_RECOVERY_LIMIT } from '../defaults.js';
import type { Queryable } from '../storage/db.js';
import { recoverExpiredLeases } from '../storage/recover.js';
import { MAX_BATCH } from '../validation.js';
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
  /** Leases per statement (default 1000), each its own short transaction. */
  batchSize?: number;
  /** Most leases this pass moves (default 100,000). */
  limit?: number;
}

/**
 * One recovery pass: returns expired leases to `pending` (after backoff) or `dead` (attempts
 * spent), in batches of `batchSize`, each its own short transaction, until a batch comes back short
 * or `limit` jobs were moved.
 */
export async function recoveryPass(
  db: Queryable,
  schema: string,
  options: RecoveryPassOptions,
): Promise<RecoveryResult> {
  const limit = options.limit ?? DEFAULT_RECOVERY_LIMIT;
  const batchSize = options.batchSize ?? MAX_BATCH;
  const total = { retried: 0, dead: 0 };
  while (total.retried + total.dead < limit) {
    const batch = Math.min(batchSize, limit - total.retried - total.dead);
    const moved = await recoverExpiredLeases(db, schema, { limit: batch, ...options.backoff });
    total.retried += moved.retried;
    total.dead += moved.dead;
    if (moved.retried + moved.dead < batch) break;
  }
  return total;
}

/** Options of the recovery service. */
export interface RecoveryServiceOptions extends MaintenanceServiceOptions, RecoveryPassOptions {
  /** Called after a pass that moved something. */
  onRecovered?: (result: RecoveryResult) => void;
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
    const { db, schema } = this.options;
    const result = await recoveryPass(db, schema, this.options);
    if (result.retried + result.dead > 0) this.options.onRecovered?.(result);
    return result;
  }
}
