import { ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { assertInt, optionalInt } from '../../shared/validation.js';
import type { JobContext } from '../run/job-context.js';
import type { OutcomeResult } from '../worker-events.js';

/** Most jobs one batch handler call may get (`batch.size`). */
export const MAX_BATCH_SIZE = 1000;
/** Longest a partial batch may wait to fill (`batch.waitMs`): one minute. */
export const MAX_BATCH_WAIT_MS = 60_000;

/** `batch` of a queue or a task: its handler gets up to `size` jobs in one call. */
export interface BatchOptions {
  /** Most jobs one call gets (1 to 1000). */
  size: number;
  /**
   * How long a partial batch waits for more jobs before its handler runs, in ms (0 to 60,000;
   * default 0: the jobs one claim brought run at once). The jobs' leases are renewed while they wait.
   */
  waitMs?: number;
}

/** Validated batch settings. */
export interface ResolvedBatch {
  size: number;
  waitMs: number;
}

/**
 * One job of a batch, as a batch handler sees it: everything a single handler's job has (its own
 * payload, id, idempotency key, attempt, lease and signal), and a way to settle it alone.
 */
export interface BatchJobContext<Payload = unknown> extends JobContext<Payload> {
  /**
   * Records this job's failure now, by the error's class as a thrown error would be (retried with
   * backoff, or dead for a `PermanentError`); the handler's result then leaves it alone. Resolves
   * to the outcome the database accepted (`lost` when the lease was gone).
   */
  fail(error: unknown): Promise<OutcomeResult>;
  /** Records a retryable failure of this job now, run again after `delayMs` (default: the backoff). */
  retry(error: unknown, options?: { delayMs?: number }): Promise<OutcomeResult>;
}

/**
 * A batch handler: gets the jobs of one batch (at most `batch.size`). Resolving completes every
 * job not settled by `fail`/`retry`, in one fenced statement; an array aligned with `jobs` gives
 * each its result. Throwing fails every job not yet settled, by the error's class.
 */
export type BatchHandler<Payload = unknown, Result = unknown> = (
  jobs: BatchJobContext<Payload>[],
) => // biome-ignore lint/suspicious/noConfusingVoidType: `async (jobs) => { ... }` resolves to void
Promise<readonly Result[] | undefined | void>;

/** Validates `batch` (null when absent); throws `ValidationError` naming the field. */
export function resolveBatch(value: unknown, field: string): ResolvedBatch | null {
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null) {
    throw new ValidationError(field, 'must be { size, waitMs? }');
  }
  rejectUnknownOptions(value, ['size', 'waitMs'], field);
  const batch = value as BatchOptions;
  return {
    size: assertInt(batch.size, `${field}.size`, 1, MAX_BATCH_SIZE),
    waitMs: optionalInt(batch.waitMs, `${field}.waitMs`, 0, MAX_BATCH_WAIT_MS, 0),
  };
}
