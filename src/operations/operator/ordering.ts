import type { LeaseholdContext } from '../../context/context.js';
import { JobNotFoundError, JobStateError, ValidationError } from '../../shared/errors.js';
import {
  assertJobId,
  assertQueueName,
  assertReasonAndActor,
  optionalInt,
  rejectUnknownOptions,
} from '../../shared/validation.js';
import { skipJob } from '../../storage/operator/skip.js';
import { listBlockedKeys } from '../../storage/queues/ordering.js';

/** Options of `skip`. */
export interface SkipOptions {
  /** Why (recorded in the job's history and as its last error message; 1 to 1000 characters). */
  reason: string;
  /** Who (up to 200 characters). */
  actor?: string;
}

/** Options of `blockedKeys`. */
export interface BlockedKeysOptions {
  /** Only this queue. */
  queue?: string;
  /** Most keys listed (1 to 10,000, default 100). */
  limit?: number;
}

/** An ordering key held up by its dead head job. */
export interface BlockedKey {
  queue: string;
  orderingKey: string;
  /** The dead job at the head of the key: replay or skip it to unblock the key. */
  headJobId: string;
  /** When the head died. */
  blockedSince: Date;
  /** How long the key has been blocked, in ms. */
  blockedMs: number;
  /** Jobs waiting behind the head. */
  waiting: number;
  /** The dead head's last error code. */
  lastErrorCode: string | null;
}

/** Skips a dead job (dead -> cancelled) so its ordering key moves on; a typed error otherwise. */
export async function skip(
  context: LeaseholdContext,
  id: string | bigint | number,
  options: SkipOptions,
): Promise<void> {
  const { pool: db, schema } = context;
  const jobId = assertJobId(id);
  const { reason, actor } = assertReasonAndActor(options);
  const found = await skipJob(db, schema, jobId, { actor, reason });
  if (found.status === null) throw new JobNotFoundError([jobId]);
  if (!found.skipped) {
    throw new JobStateError('skip', 'only dead jobs can be skipped', [{ id: jobId, status: found.status }]);
  }
}

/** Lists ordering keys blocked by a dead head, longest blocked first. */
export async function blockedKeys(
  context: LeaseholdContext,
  options: BlockedKeysOptions,
): Promise<BlockedKey[]> {
  const { pool: db, schema } = context;
  if (typeof options !== 'object' || options === null)
    throw new ValidationError('options', 'must be an object');
  rejectUnknownOptions(options, ['queue', 'limit'], 'options');
  if (options.queue !== undefined) assertQueueName(options.queue, 'queue');
  const limit = optionalInt(options.limit, 'limit', 1, 10_000, 100);
  const rows = await listBlockedKeys(db, schema, options.queue ?? null, limit);
  return rows.map((row) => ({
    queue: row.queue_name,
    orderingKey: row.ordering_key,
    headJobId: row.head_id,
    blockedSince: row.blocked_since,
    blockedMs: Math.round(row.blocked_ms),
    waiting: row.waiting,
    lastErrorCode: row.last_error_code,
  }));
}
