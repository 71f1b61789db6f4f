import type pg from 'pg';
import {
  DEFAULT_PRUNE_BATCH,
  DEFAULT_PRUNE_LIMIT,
  DEFAULT_SUCCEEDED_RETENTION_MS,
} from '../shared/defaults.js';
import { isLeaseholdError, PermissionError } from '../shared/errors.js';
import type { Queryable } from '../storage/db.js';
import { pruneFlowsBatch } from '../storage/flows/flows.js';
import { recordKnownQueues } from '../storage/queues/known-queues.js';
import { pruneRateLimitKeysBatch, type RateLimitKeyCursor } from '../storage/queues/rate-limits.js';
import { withMaintenanceLock } from '../storage/upkeep/maintenance-lock.js';
import { type FinishedCursor, pruneFinishedBatch, pruneTerminalBatch } from '../storage/upkeep/retention.js';
import { type MaintenanceServiceOptions, PeriodicService } from './periodic-service.js';

export {
  DEFAULT_PRUNE_BATCH,
  DEFAULT_PRUNE_INTERVAL_MS,
  DEFAULT_PRUNE_LIMIT,
  DEFAULT_SUCCEEDED_RETENTION_MS,
} from '../shared/defaults.js';

/** What one retention pass removed. */
export interface PruneResult {
  /** Succeeded jobs removed (their finished records, events, effects and keys). */
  succeeded: number;
  /** Dead and cancelled jobs removed past their queue's retention, each leaving a tombstone. */
  terminal: number;
  /** The pass did not run: another process holds the retention lock. */
  skipped: boolean;
}

/** Settings of one pass, validated by the caller. */
export interface PrunePassOptions {
  succeededRetentionMs: number;
  batchSize: number;
  limit: number;
}

/**
 * Runs one batch of a pass (in its own short transaction, where the runner opens one); resolves
 * null, running nothing, when the batch may not run now because another process is pruning.
 */
export type BatchRunner = <T>(batch: (db: Queryable) => Promise<T>) => Promise<T | null>;

/**
 * One retention pass: succeeded jobs past their retention, then dead and cancelled jobs past their
 * queue's dead retention, then flows whose jobs are all gone and rate-limit windows whose starts
 * have all left the window (neither counted in the result), each in bounded batches (each its own short transaction), until a batch
 * comes back short or `limit` rows of a kind were removed. A batch the runner refuses ends the pass
 * (another process is pruning and goes on); refused at the first batch, the pass is `skipped`.
 */
export async function prunePass(
  runBatch: BatchRunner,
  schema: string,
  options: PrunePassOptions,
): Promise<PruneResult> {
  const result: PruneResult = { succeeded: 0, terminal: 0, skipped: false };
  let batches = 0;
  const next = async <T>(batch: (db: Queryable) => Promise<T>): Promise<T | null> => {
    const answer = await runBatch(batch);
    if (answer === null && batches === 0) result.skipped = true;
    batches++;
    return answer;
  };
  // Known queues outlive their last job (issue 38): the queues of the jobs this pass may remove
  // are recorded first, as queues rows, in a batch of their own.
  if ((await next((db) => recordKnownQueues(db, schema))) === null) return result;
  let after: FinishedCursor | null = null;
  while (result.succeeded < options.limit) {
    const batchLimit = Math.min(options.batchSize, options.limit - result.succeeded);
    const cursor: FinishedCursor | null = after;
    const batch: Awaited<ReturnType<typeof pruneFinishedBatch>> | null = await next((db) =>
      pruneFinishedBatch(db, schema, {
        limit: batchLimit,
        defaultRetentionMs: options.succeededRetentionMs,
        after: cursor,
      }),
    );
    if (batch === null) return result;
    result.succeeded += batch.removed;
    if (batch.next === null || batch.seen < batchLimit) break;
    after = batch.next;
  }
  while (result.terminal < options.limit) {
    const batchLimit = Math.min(options.batchSize, options.limit - result.terminal);
    const batch = await next((db) => pruneTerminalBatch(db, schema, batchLimit));
    if (batch === null) return result;
    result.terminal += batch.removed;
    if (batch.seen < batchLimit) break;
  }
  // Flows none of whose jobs has a record left (nodes and edges go with them), paged by flow id.
  let flowCursor: string | null = '0';
  let flowsSeen = 0;
  while (flowCursor !== null && flowsSeen < options.limit) {
    const after: string = flowCursor;
    const batch = await next((db) => pruneFlowsBatch(db, schema, options.batchSize, after));
    if (batch === null) return result;
    flowsSeen += batch.seen;
    flowCursor = batch.next;
  }
  // Rate-limit windows that limit nothing any more (not counted in the result either): a per-key
  // limit on a high-cardinality key leaves a row per key. Paged by key, at most `limit` examined.
  let keyCursor: RateLimitKeyCursor | null = null;
  let keysSeen = 0;
  while (keysSeen < options.limit) {
    const after: RateLimitKeyCursor | null = keyCursor;
    const batchLimit = Math.min(options.batchSize, options.limit - keysSeen);
    const batch: Awaited<ReturnType<typeof pruneRateLimitKeysBatch>> | null = await next((db) =>
      pruneRateLimitKeysBatch(db, schema, batchLimit, after),
    );
    if (batch === null) return result;
    keysSeen += batch.seen;
    if (batch.next === null) break;
    keyCursor = batch.next;
  }
  return result;
}

/** Options of the retention service. */
export interface RetentionServiceOptions extends Omit<MaintenanceServiceOptions, 'db'> {
  /** The pool each batch's connection is taken from. */
  db?: pg.Pool;
  /** @deprecated The same as `db`, its former name. */
  pool?: pg.Pool;
  /** Default retention of succeeded jobs (per queue: `configureQueue`), default 1 hour. */
  succeededRetentionMs?: number;
  /** Rows per statement (default 1000). */
  batchSize?: number;
  /** Most rows of each kind one pass removes (default 1,000,000). */
  limit?: number;
  /** Replaces the pass (runs each batch through the given runner, which takes the lock per batch). */
  prune?: (runBatch: BatchRunner) => Promise<PruneResult>;
  /** Called after a pass that removed something. */
  onPruned?: (result: PruneResult) => void;
}

/**
 * Runs retention passes on a slow jittered timer. Every worker process runs one, but each batch of
 * a pass runs in a short transaction that first takes a transaction-level advisory lock (without
 * waiting): a pass that finds it taken is skipped, and one that finds it taken between batches
 * ends, so one process prunes a schema at a time. Concurrent batches would be safe (each takes rows
 * with SKIP LOCKED) but would only repeat each other's scans. No lock outlives its batch's
 * transaction, so this works behind a transaction-mode pooler, and a crashed holder holds nothing.
 * Pruning is an operator's power: a process whose role may not prune (leasehold_worker) reports
 * that once, as a `PermissionError`, and turns its retention off instead of failing every interval.
 */
export class RetentionService extends PeriodicService<PruneResult> {
  constructor(private readonly options: RetentionServiceOptions) {
    super(options.intervalMs, options.onError);
  }

  /** Runs one pass now (or reports it skipped when another process is pruning). */
  override async runOnce(): Promise<PruneResult> {
    const { schema } = this.options;
    const pool = (this.options.db ?? this.options.pool) as pg.Pool;
    const runBatch: BatchRunner = (batch) => withMaintenanceLock(pool, schema, 'retention', batch);
    try {
      const result = await (this.options.prune
        ? this.options.prune(runBatch)
        : prunePass(runBatch, schema, {
            succeededRetentionMs: this.options.succeededRetentionMs ?? DEFAULT_SUCCEEDED_RETENTION_MS,
            batchSize: this.options.batchSize ?? DEFAULT_PRUNE_BATCH,
            limit: this.options.limit ?? DEFAULT_PRUNE_LIMIT,
          }));
      if (result.succeeded + result.terminal > 0) this.options.onPruned?.(result);
      return result;
    } catch (err) {
      if (isLeaseholdError(err, 'PERMISSION_DENIED')) {
        this.retire();
        throw new PermissionError(
          `retention is turned off in this process: its database role may not prune (${err.message.split(';')[0]}). ` +
            'Run retention under leasehold_admin (leasehold prune from a scheduled job, or one worker connected ' +
            'as admin), and set pruneIntervalMs: 0 on workers that run as leasehold_worker',
          err,
        );
      }
      throw err;
    }
  }
}
