import type { LeaseholdContext } from '../../context/context.js';
import { JobNotFoundError, JobStateError } from '../../shared/errors.js';
import { assertJobId, assertReasonAndActor } from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import { cancelJob } from '../../storage/operator/cancel.js';

/** Options of `cancel`. */
export interface CancelOptions {
  /** Why (recorded in the job's history and as its last error message; 1 to 1000 characters). */
  reason: string;
  /** Who (up to 200 characters). */
  actor?: string;
  /** Cancel inside this transaction: a rollback undoes the cancel. */
  client?: Queryable;
}

/** What `cancel` did. */
export interface CancelResult {
  id: string;
  /** The status it was cancelled from: a running job's worker is now fenced out. */
  previousStatus: 'pending' | 'running';
}

/** Cancels a pending or running job; a missing or finished job is a typed error. */
export async function cancel(
  context: LeaseholdContext,
  id: string | bigint | number,
  options: CancelOptions,
): Promise<CancelResult> {
  const { pool: db, schema } = context;
  const jobId = assertJobId(id);
  const { client, ...rest } = (options ?? {}) as CancelOptions;
  const { reason, actor } = assertReasonAndActor(options === undefined || options === null ? options : rest);
  const found = await cancelJob(client ?? db, schema, jobId, { actor, reason });
  if (found.status === null) throw new JobNotFoundError([jobId]);
  if (!found.cancelled) {
    throw new JobStateError('cancel', 'only pending or running jobs can be cancelled', [
      { id: jobId, status: found.status },
    ]);
  }
  return { id: jobId, previousStatus: found.status as 'pending' | 'running' };
}
