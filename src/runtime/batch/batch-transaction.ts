import type pg from 'pg';
import { LeaseholdError, LeaseLostError, ValidationError } from '../../shared/errors.js';
import { type CompleteRef, completeJobs } from '../../storage/leases/complete.js';
import { recordRefusedCompletion, setTransactionTimeouts } from '../../storage/leases/job-transaction.js';
import { findLandedOutcomes } from '../../storage/leases/outcome-lookup.js';
import type { EffectStore } from '../run/job-context.js';
import {
  abandonedError,
  type JobTransactionOptions,
  poolTransactions,
  type TransactionAdapter,
  type TransactionHost,
  transactionAdapter,
} from '../run/job-transaction.js';

/** What the batch's transaction needs of each job of the batch (a `BatchTransactionItem` is one). */
export interface BatchTransactionItem extends TransactionHost {
  readonly id: string;
  /** Its claim saw it plain (storage/leases/complete.ts). */
  readonly plain: boolean;
  /** The outcome `fail` or `retry` asked for, if either did. */
  readonly aloneOutcome: Promise<unknown> | null;
}

import { resultText } from '../run/job-output.js';

// Thrown inside the library's transaction to make it roll back when a completion was refused.
const REFUSED = Symbol('leasehold.batch-refused');

/** How many times `fn` runs when the completion keeps meeting a lane move (as job-transaction.ts). */
const MOVED_ROW_ATTEMPTS = 4;

/**
 * `job.transaction` of an item of a batch: `fn`'s writes and the fenced completions of every job
 * of the batch not yet settled (by `fail`, `retry` or an earlier transaction), in one transaction,
 * one completion statement: all accepted and committed, or none. When the fence refuses any of
 * them, everything rolls back, the refused jobs' runs end `lost` (their refusals counted again,
 * since the rollback took the statement's count with it), the others stay unsettled (still held:
 * the batch's end completes or fails them), and `LeaseLostError` is thrown. An array of one value
 * per job of the batch that `fn` resolves to is stored as the jobs' results.
 */
export async function runBatchTransaction<Tx, T>(
  batch: readonly BatchTransactionItem[],
  store: EffectStore,
  fn: (tx: Tx) => Promise<T> | T,
  options: JobTransactionOptions<Tx> | undefined,
): Promise<T> {
  if (typeof fn !== 'function')
    throw new ValidationError('fn', 'job.transaction takes a function (tx) => ...');
  const items = batch.filter((item) => !item.reported && item.aloneOutcome === null);
  // The default adapter abandons the transaction once the first of the batch's leases runs out.
  const deadline = () => Math.min(...items.map((item) => item.deadline));
  const adapter = (
    options === undefined ? poolTransactions(store.pool, deadline) : transactionAdapter(options)
  ) as TransactionAdapter<Tx>;
  if (items.length === 0 || items.some((item) => item.transacting)) {
    throw new LeaseholdError('JOB_STATE', 'this batch has no job left to complete, or a transaction is open');
  }
  const gone = items.find((item) => !item.holdsLease);
  if (gone) throw new LeaseLostError(`the lease on job ${gone.id} was lost; no transaction was opened`);
  for (const item of items) item.transacting = true;
  try {
    for (let attempt = 1; ; attempt++) {
      const run = await runOnce(batch, items, store, fn, adapter);
      if (run.done) return run.value;
      if (attempt >= MOVED_ROW_ATTEMPTS || items.some((item) => !item.holdsLease)) throw run.error;
      for (const item of items) item.completing = false;
    }
  } finally {
    for (const item of items) {
      item.transacting = false;
      if (!item.reported) item.completing = false;
    }
  }
}

async function runOnce<Tx, T>(
  batch: readonly BatchTransactionItem[],
  items: readonly BatchTransactionItem[],
  store: EffectStore,
  fn: (tx: Tx) => Promise<T> | T,
  adapter: TransactionAdapter<Tx>,
): Promise<{ done: true; value: T } | { done: false; error: unknown }> {
  let accepted: Set<string> | null = null;
  let presented = false;
  let produced: T | undefined;
  try {
    const value = await adapter.transaction(async (tx, db) => {
      const deadline = Math.min(...items.map((item) => item.deadline));
      await setTransactionTimeouts(db, deadline - performance.now());
      const result = await fn(tx);
      const refs = completionRefs(batch, items, result, store.maxResultBytes);
      for (const item of items) item.completing = true;
      await renewalsSettled(items, deadline);
      // As for every outcome: leases this process already considers gone are not presented.
      if (items.every((item) => item.holdsLease)) {
        presented = true;
        accepted = await completeJobs(db, store.schema, refs);
      }
      if (accepted === null || accepted.size < items.length) throw REFUSED;
      produced = result;
      return result;
    });
    settle(items);
    return { done: true, value };
  } catch (err) {
    if (err === REFUSED) return refused(items, store, accepted);
    // The COMMIT's answer was lost (the connection died): if the completions landed, so did the writes.
    if (accepted !== null && (await landedAnyway(items, store))) {
      settle(items);
      return { done: true, value: produced as T };
    }
    if (presented && accepted === null && isMovedRowConflict(err)) return { done: false, error: err };
    const gone = items.find((item) => !item.holdsLease);
    if (accepted === null && gone) throw abandonedError(gone.id, err);
    throw err;
  }
}

// The completion of each held job, with its result when `fn` resolved to one value per job of the batch.
function completionRefs(
  batch: readonly BatchTransactionItem[],
  items: readonly BatchTransactionItem[],
  result: unknown,
  maxResultBytes: number,
): CompleteRef[] {
  const perJob = Array.isArray(result) && result.length === batch.length ? result : null;
  return items.map((item) => {
    const text = perJob === null ? null : resultText(perJob[batch.indexOf(item)], maxResultBytes);
    return { ...item.lease, result: text, plain: item.plain };
  });
}

// Some completion was refused (or never presented): the refused runs are lost, the rest stay held.
async function refused(
  items: readonly BatchTransactionItem[],
  store: EffectStore,
  accepted: Set<string> | null,
): Promise<never> {
  const lost = items.filter((item) => !item.holdsLease || (accepted !== null && !accepted.has(item.id)));
  for (const item of lost) {
    item.reported = true;
    item.ownOutcome = 'lost';
    item.lostLease();
    // Best effort: the rolled-back statement's refusal count is written again, outside it.
    if (accepted !== null)
      await recordRefusedCompletion(store.pool, store.schema, item.lease).catch(() => {});
  }
  for (const item of items) if (!item.reported) item.completing = false;
  throw new LeaseLostError(
    `the lease on job ${lost.map((item) => item.id).join(', ')} was lost; the batch's transaction was rolled back`,
  );
}

function settle(items: readonly BatchTransactionItem[]): void {
  for (const item of items) {
    item.reported = true;
    item.ownOutcome = 'completed';
  }
}

async function landedAnyway(
  items: readonly BatchTransactionItem[],
  store: { pool: pg.Pool; schema: string },
): Promise<boolean> {
  const [first] = items; // one transaction: if one completion landed, all did
  if (!first) return false;
  try {
    const landed = await findLandedOutcomes(store.pool, store.schema, [first.lease]);
    return landed.get(first.id) === 'completed';
  } catch {
    return false;
  }
}

// serialization_failure (a lane move met the completion), as the driver or Leasehold reports it.
function isMovedRowConflict(err: unknown): boolean {
  const e = err as { code?: unknown; sqlState?: unknown } | null;
  return e?.sqlState === '40001' || e?.code === '40001';
}

// Renewals already sent lock the jobs' rows; the completion waits for their answers instead of racing them.
async function renewalsSettled(items: readonly BatchTransactionItem[], deadline: number): Promise<void> {
  while (items.some((item) => item.renewing) && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
