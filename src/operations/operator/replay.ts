import { JobNotFoundError, JobStateError, ValidationError } from '../../shared/errors.js';
import {
  assertJobId,
  assertQueueName,
  assertText,
  MAX_BATCH,
  optionalBoolean,
  optionalDate,
  optionalInt,
  optionalText,
  rejectUnknownOptions,
} from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import {
  countDeadJobs,
  type ReplayFilterParams,
  type ReplayParams,
  replayBatch,
  replayJobs,
} from '../../storage/operator/replay.js';

/** Which dead jobs to replay by filter; at least one criterion is required. */
export interface ReplayFilter {
  /** Dead jobs of this queue. */
  queue?: string;
  /** That died with this error code. */
  errorCode?: string;
  /** That died at or after this time. */
  since?: Date;
  /** That died before this time. */
  before?: Date;
}

/** Progress of a filter replay, reported after each batch. */
export interface ReplayProgress {
  /** Jobs replayed so far. */
  replayed: number;
  /** Dead jobs the filter matched when the replay started. */
  total: number;
}

/** Options of `replay`. */
export interface ReplayOptions {
  /** Why (recorded in each job's history; 1 to 1000 characters). */
  reason: string;
  /** Who (recorded too; up to 200 characters). */
  actor?: string;
  /** Restart attempt numbering at 1 (default true); false keeps counting and raises maxAttempts. */
  resetAttempts?: boolean;
  /** Forget effects left uncertain, so they are performed again (default false: reconcile or stay dead). */
  retryUncertainEffects?: boolean;
  /** Jobs per batch of a filter replay (1..1000, default 500), each its own short transaction. */
  batchSize?: number;
  /** Called after each batch of a filter replay. */
  onProgress?: (progress: ReplayProgress) => void;
  /** Replay inside this transaction (every batch of a filter replay too): a rollback undoes it. */
  client?: Queryable;
}

/** What a replay did. */
export interface ReplayResult {
  /** Jobs returned to pending. */
  replayed: number;
  /** Their ids, for an explicit id list (a filter replay reports only the count). */
  ids?: string[];
}

const KNOWN_OPTIONS = [
  'reason',
  'actor',
  'resetAttempts',
  'retryUncertainEffects',
  'batchSize',
  'onProgress',
  'client',
];
const KNOWN_FILTER = ['queue', 'errorCode', 'since', 'before'];

/**
 * Returns dead jobs to pending with the same id and a fresh attempt budget, keeping their history
 * and adding a `replayed` event. An id list is all or nothing: if any listed job is missing or not
 * dead, nothing is written and the error names them. A filter replays in bounded batches.
 */
export async function replay(
  db: Queryable,
  schema: string,
  target: readonly (string | bigint | number)[] | ReplayFilter,
  options: ReplayOptions,
): Promise<ReplayResult> {
  const params = replayParams(options);
  const on = options.client ?? db;
  if (isIdList(target)) return replayIds(on, schema, target, params);
  const filter = replayFilter(target);
  const batchSize = optionalInt(options.batchSize, 'batchSize', 1, MAX_BATCH, 500);
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    throw new ValidationError('onProgress', 'must be a function');
  }
  // Jobs that die after this moment are not part of this replay, whatever else the filter says.
  const total = await countDeadJobs(on, schema, filter);
  let replayed = 0;
  let afterId = '0';
  for (;;) {
    const batch = await replayBatch(on, schema, filter, afterId, batchSize, params);
    replayed += batch.replayed;
    options.onProgress?.({ replayed, total: Math.max(total, replayed) });
    if (batch.seen < batchSize || batch.lastId === null) break;
    afterId = batch.lastId;
  }
  return { replayed };
}

function isIdList(target: unknown): target is readonly (string | bigint | number)[] {
  return Array.isArray(target);
}

async function replayIds(
  db: Queryable,
  schema: string,
  list: readonly (string | bigint | number)[],
  params: ReplayParams,
): Promise<ReplayResult> {
  if (list.length === 0 || list.length > MAX_BATCH) {
    throw new ValidationError('ids', `must list 1 to ${MAX_BATCH} job ids (replay more with a filter)`);
  }
  const ids = list.map((id, i) => assertJobId(id, `ids[${i}]`));
  const rows = await replayJobs(db, schema, ids, params);
  const missing = rows.filter((row) => row.status === null).map((row) => row.id);
  if (missing.length > 0) throw new JobNotFoundError(missing);
  const notDead = rows
    .filter((row) => row.status !== 'dead')
    .map((row) => ({ id: row.id, status: row.status ?? '' }));
  if (notDead.length > 0) throw new JobStateError('replay', 'only dead jobs can be replayed', notDead);
  const replayed = rows.filter((row) => row.replayed).map((row) => row.id);
  return { replayed: replayed.length, ids: replayed };
}

function replayParams(options: ReplayOptions): ReplayParams {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('options', 'must be an object with at least a reason');
  }
  rejectUnknownOptions(options, KNOWN_OPTIONS, 'options');
  return {
    reason: assertText(options.reason, 'reason', 1000),
    actor: optionalText(options.actor, 'actor', 200),
    resetAttempts: optionalBoolean(options.resetAttempts, 'resetAttempts', true),
    retryUncertainEffects: optionalBoolean(options.retryUncertainEffects, 'retryUncertainEffects', false),
  };
}

function replayFilter(filter: ReplayFilter): ReplayFilterParams {
  if (typeof filter !== 'object' || filter === null) {
    throw new ValidationError(
      'target',
      'must be a list of job ids or a filter { queue, errorCode, since, before }',
    );
  }
  rejectUnknownOptions(filter, KNOWN_FILTER, 'filter');
  if (filter.queue !== undefined) assertQueueName(filter.queue, 'filter.queue');
  const params: ReplayFilterParams = {
    queue: filter.queue ?? null,
    errorCode: optionalText(filter.errorCode, 'filter.errorCode', 64),
    since: optionalDate(filter.since, 'filter.since'),
    before: optionalDate(filter.before, 'filter.before'),
  };
  if (Object.values(params).every((value) => value === null)) {
    throw new ValidationError('filter', 'name at least one of queue, errorCode, since, before');
  }
  return params;
}
