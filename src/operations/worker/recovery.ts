import type { LeaseholdContext } from '../../context/context.js';
import { type RecoveryResult, recoveryPass } from '../../maintenance/recovery.js';
import { type BackoffOptions, resolveBackoff } from '../../shared/config.js';
import { DEFAULT_RECOVERY_LIMIT } from '../../shared/defaults.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { MAX_BATCH, optionalInt, optionsObject } from '../../shared/validation.js';

/** Options of `recoverExpired`. */
export interface RecoverOptions {
  /** Most jobs this call moves (default 100,000). */
  limit?: number;
  /** Leases per statement (1..1000, default 1000), each its own short transaction. */
  batchSize?: number;
  /** Backoff of the jobs returned to `pending` (default: the client's). */
  backoff?: BackoffOptions;
}

/** `lh.recoverExpired`: one recovery pass now (the sweep workers run on a timer), with validated bounds. */
export async function recoverExpired(
  context: LeaseholdContext,
  given?: RecoverOptions,
): Promise<RecoveryResult> {
  const options = optionsObject(given);
  rejectUnknownOptions(options, ['limit', 'batchSize', 'backoff'], 'options');
  const backoff =
    options.backoff === undefined
      ? context.backoff
      : resolveBackoff(options.backoff, 'backoff', context.backoff);
  const { maxDelayMs: _due, ...moved } = await recoveryPass(context.pool, context.schema, {
    backoff,
    limit: optionalInt(options.limit, 'limit', 1, Number.MAX_SAFE_INTEGER, DEFAULT_RECOVERY_LIMIT),
    batchSize: optionalInt(options.batchSize, 'batchSize', 1, MAX_BATCH, MAX_BATCH),
  });
  return moved;
}
