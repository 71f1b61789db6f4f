import type pg from 'pg';
import { guardCheckedOut } from '../storage/checkout.js';
import type { Queryable } from '../storage/db.js';
import { releaseMaintenanceLock, tryMaintenanceLock } from '../storage/maintenance-lock.js';
import { type FinishedCursor, pruneFinishedBatch, pruneTerminalBatch } from '../storage/retention.js';
import { PeriodicService } from './periodic-service.js';

/** Succeeded jobs are kept this long by default (per queue: `configureQueue`'s `succeededRetentionMs`). */
export const DEFAULT_SUCCEEDED_RETENTION_MS = 3_600_000;
/** Mean interval between a worker's retention passes (jittered by ±25%). */
export const DEFAULT_PRUNE_INTERVAL_MS = 60_000;
/** Rows examined per pruning statement. */
export const DEFAULT_PRUNE_BATCH = 1000;
/** Most rows of each kind one pass removes; the next pass goes on. */
export const DEFAULT_PRUNE_LIMIT = 1_000_000;

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
 * One retention pass: succeeded jobs past their retention, then dead and cancelled jobs past their
 * queue's dead retention, each in bounded batches (each its own short transaction), until a batch
 * comes back short or `limit` rows of a kind were removed.
 */
export async function prunePass(
  db: Queryable,
  schema: string,
  options: PrunePassOptions,
): Promise<PruneResult> {
  const result: PruneResult = { succeeded: 0, terminal: 0, skipped: false };
  let after: FinishedCursor | null = null;
  while (result.succeeded < options.limit) {
    const batchLimit = Math.min(options.batchSize, options.limit - result.succeeded);
    const batch = await pruneFinishedBatch(db, schema, {
      limit: batchLimit,
      defaultRetentionMs: options.succeededRetentionMs,
      after,
    });
    result.succeeded += batch.removed;
    if (batch.next === null || batch.seen < batchLimit) break;
    after = batch.next;
  }
  while (result.terminal < options.limit) {
    const batchLimit = Math.min(options.batchSize, options.limit - result.terminal);
    const batch = await pruneTerminalBatch(db, schema, batchLimit);
    result.terminal += batch.removed;
    if (batch.seen < batchLimit) break;
  }
  return result;
}

/** Options of the retention service. */
export interface RetentionServiceOptions {
  /** Mean interval between passes, in ms; each wait is jittered by ±25%. */
  intervalMs: number;
  /** The pool to take the pass's connection from. */
  pool: pg.Pool;
  /** The schema pruned (names the lock). */
  schema: string;
  /** One pass, run on the connection that holds the lock. */
  prune: (db: Queryable) => Promise<PruneResult>;
  /** Called after a pass that removed something. */
  onPruned?: (result: PruneResult) => void;
  /** Called when a pass fails; the service keeps going. */
  onError?: (err: unknown) => void;
}

/**
 * Runs retention passes on a slow jittered timer. Every worker process runs one, but a pass first
 * takes a session-level advisory lock (without waiting) on a connection it keeps for the pass, and
 * skips when another process holds it: concurrent passes would be safe (every batch takes rows
 * with SKIP LOCKED) but would only repeat each other's scans. A crashed holder's lock ends with its
 * connection.
 */
export class RetentionService extends PeriodicService<PruneResult> {
  constructor(private readonly options: RetentionServiceOptions) {
    super(options.intervalMs, options.onError);
  }

  /** Runs one pass now (or reports it skipped when another process is pruning). */
  override async runOnce(): Promise<PruneResult> {
    const { pool, schema } = this.options;
    const client = await pool.connect();
    const unguard = guardCheckedOut(client);
    let broken: Error | undefined;
    try {
      if (!(await tryMaintenanceLock(client, schema, 'retention'))) {
        return { succeeded: 0, terminal: 0, skipped: true };
      }
      try {
        const result = await this.options.prune(client);
        if (result.succeeded + result.terminal > 0) this.options.onPruned?.(result);
        return result;
      } finally {
        await releaseMaintenanceLock(client, schema, 'retention');
      }
    } catch (err) {
      // A connection whose lock state is unknown must not go back to the pool holding the lock.
      broken = err instanceof Error ? err : new Error(String(err));
      throw err;
    } finally {
      unguard();
      client.release(broken);
    }
  }
}
