import type pg from 'pg';
import type { Lease } from '../../records/lease.js';
import { LeaseholdError, LeaseLostError, ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { guardCheckedOut, type Queryable } from '../../storage/db.js';
import { completeJobs } from '../../storage/leases/complete.js';
import { recordRefusedCompletion, setTransactionTimeouts } from '../../storage/leases/job-transaction.js';
import { findLandedOutcomes } from '../../storage/leases/outcome-lookup.js';
import { resultText } from './job-output.js';

/**
 * Opens a transaction with some database library, runs `body` in it, commits when `body` resolves
 * and rolls back when it throws. `tx` is what the handler's callback receives (the library's own
 * transaction object); `db` runs Leasehold's statements on that same transaction. The adapters of
 * `leasehold/kysely`, `leasehold/knex`, `leasehold/drizzle`, `leasehold/postgres-js` and
 * `leasehold/prisma` build one from the library's database object.
 */
export interface TransactionAdapter<Tx> {
  /** Runs `body` in one transaction of the library, committed when it resolves. */
  transaction<T>(body: (tx: Tx, db: Queryable) => Promise<T>): Promise<T>;
}

/** Options of `job.transaction`. */
export interface JobTransactionOptions<Tx> {
  /** Open the transaction through this library adapter (default: a `pg` client from the worker's pool). */
  with: TransactionAdapter<Tx>;
}

/** Where `job.transaction` runs Leasehold's own statements outside the transaction, and the result bound. */
export interface TransactionStore {
  readonly pool: pg.Pool;
  readonly schema: string;
  /** Largest value of `fn` kept as the job's result, in JSON bytes. */
  readonly maxResultBytes: number;
}

/** What `job.transaction` needs from the running job (an `ActiveJob` is one). */
export interface TransactionHost {
  readonly lease: Lease;
  /** The lease is still ours as far as this process can tell. */
  readonly holdsLease: boolean;
  /** When the worker must consider the lease gone (performance.now() time). */
  readonly deadline: number;
  /** An outcome for this run was written or queued. */
  reported: boolean;
  /** A renewal of this lease is in flight. */
  readonly renewing: boolean;
  /** The transaction runs: the keeper renews the lease as if the handler reported progress. */
  transacting: boolean;
  /** The completion is being presented: the keeper sends no renewal that could race it. */
  completing: boolean;
  /** The outcome `job.transaction` settled, for the worker to count instead of completing again. */
  ownOutcome: 'completed' | 'lost' | null;
  /** Called when the database refused the completion: the lease is gone. */
  lostLease(): void;
}

// Thrown inside the library's transaction to make it roll back when the completion was refused.
const REFUSED = Symbol('leasehold.refused');

/**
 * The default adapter: a client checked out of the worker's pool, BEGIN ... COMMIT on it. Given
 * `deadline` (the lease's local deadline in performance.now() time, read again as renewals move
 * it), a transaction still open when the deadline passes is abandoned: its connection is closed,
 * so a statement that will never be answered (a black-holed network, a primary cut off) fails at
 * once rather than at the client's statement timeout, and the transaction cannot commit any more
 * (the server rolls it back when it sees the connection gone). `statement_timeout` alone cannot do
 * this: it is the server's, and a server out of reach answers nothing.
 */
export function poolTransactions(pool: pg.Pool, deadline?: () => number): TransactionAdapter<pg.PoolClient> {
  return {
    async transaction(body) {
      const client = await pool.connect();
      const unguard = guardCheckedOut(client);
      const watch = deadline === undefined ? null : abandonAtDeadline(client, deadline);
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        try {
          const value = await body(client, client);
          await client.query('COMMIT');
          return value;
        } catch (err) {
          await client.query('ROLLBACK').catch((rollbackError: Error) => {
            broken = rollbackError; // the connection is gone or unusable: do not pool it again
          });
          throw err;
        }
      } finally {
        watch?.stop();
        unguard();
        client.release(broken ?? watch?.abandoned ?? undefined);
      }
    },
  };
}

/** How long the deadline watch sleeps at most before reading the deadline again. */
const DEADLINE_WATCH_MAX_MS = 60_000;

// Closes `client`'s connection once `deadline()` has passed (re-read when the timer fires: a
// renewal moves it later). `abandoned` is then set, and the connection must not be pooled again.
function abandonAtDeadline(
  client: pg.PoolClient,
  deadline: () => number,
): { abandoned: Error | null; stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  const watch = {
    abandoned: null as Error | null,
    stop: () => clearTimeout(timer),
  };
  const check = () => {
    const left = deadline() - performance.now();
    if (left > 0) {
      timer = setTimeout(check, Math.min(left, DEADLINE_WATCH_MAX_MS));
      return;
    }
    watch.abandoned = new LeaseLostError('the lease deadline passed while the transaction was open');
    // pg has no public way to drop a connection at once (end() waits for the server); as the
    // client's read timeout does in connection/primary.ts, its socket is destroyed.
    (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  };
  check();
  return watch;
}

/**
 * `job.transaction`: the handler's writes and the job's fenced completion in one transaction, both
 * committed or neither. A refused completion (the lease moved on) rolls the writes back, counts the
 * refusal on the pool (the rolled-back transaction took its count with it) and throws
 * `LeaseLostError`; the run's outcome is then `lost`. Once committed, the handler's return completes
 * nothing more. Statements and idle time inside are bounded by the lease time left. A completion
 * that meets the lane rotation moving the job's row runs `fn` again in a new transaction (runOnce).
 * The value `fn` resolves to is the job's result, stored by that same completion (a value too large
 * or not JSON throws `PermanentError` before it: the transaction rolls back and the job goes dead).
 */
export async function runJobTransaction<Tx, T>(
  host: TransactionHost,
  store: TransactionStore,
  fn: (tx: Tx) => Promise<T> | T,
  adapter: TransactionAdapter<Tx>,
): Promise<T> {
  if (typeof fn !== 'function')
    throw new ValidationError('fn', 'job.transaction takes a function (tx) => ...');
  if (host.reported || host.transacting) {
    throw new LeaseholdError(
      'JOB_STATE',
      `job ${host.lease.jobId} already has an outcome or an open transaction`,
    );
  }
  if (!host.holdsLease) throw new LeaseLostError(`the lease on job ${host.lease.jobId} was lost`);
  host.transacting = true;
  try {
    for (let attempt = 1; ; attempt++) {
      const run = await runOnce(host, store, fn, adapter);
      if (run.done) return run.value;
      // The completion met a lane move (see below): nothing of this run was committed.
      if (attempt >= MOVED_ROW_ATTEMPTS || !host.holdsLease) throw run.error;
      host.completing = false;
    }
  } finally {
    host.transacting = false;
    if (!host.reported) host.completing = false;
  }
}

/**
 * How many times `fn` runs when its completion keeps meeting a lane move (as often as run() in
 * storage/db.ts sends an autocommit statement again: the rotation moves a row once per turn).
 */
const MOVED_ROW_ATTEMPTS = 4;

/**
 * One transaction of `fn` and the completion. `done: false` when the completion statement met the
 * lane rotation moving the job's row (serialization_failure, 40001: migration 018): the transaction
 * was rolled back, the handler's writes with it, and the lease is untouched, so `fn` runs again in
 * a new transaction under the same lease. The completion cannot be re-sent alone: the failed
 * statement aborted the transaction holding the handler's writes. Run again, the writes and the
 * completion still commit together, once (exactly once on the caller's tables).
 */
async function runOnce<Tx, T>(
  host: TransactionHost,
  store: TransactionStore,
  fn: (tx: Tx) => Promise<T> | T,
  adapter: TransactionAdapter<Tx>,
): Promise<{ done: true; value: T } | { done: false; error: unknown }> {
  let refused = false;
  let presented = false;
  let accepted = false;
  let produced: T | undefined;
  try {
    const value = await adapter.transaction(async (tx, db) => {
      await setTransactionTimeouts(db, host.deadline - performance.now());
      const result = await fn(tx);
      const text = resultText(result, store.maxResultBytes);
      host.completing = true;
      await renewalSettled(host);
      // As for every outcome: a lease this process already considers gone is not presented.
      if (host.holdsLease) {
        presented = true;
        const ref = text === null ? host.lease : { ...host.lease, result: text };
        accepted = (await completeJobs(db, store.schema, [ref])).has(host.lease.jobId);
      }
      if (!accepted) {
        refused = true;
        throw REFUSED;
      }
      produced = result;
      return result;
    });
    settle(host, 'completed');
    return { done: true, value };
  } catch (err) {
    if (refused) {
      settle(host, 'lost');
      host.lostLease();
      // The refusal the fenced statement counted was rolled back with the transaction: count it again.
      // Best effort: the outcome is `lost` whether or not this count lands.
      if (presented) await recordRefusedCompletion(store.pool, store.schema, host.lease).catch(() => {});
      throw new LeaseLostError(
        `the lease on job ${host.lease.jobId} was lost; its transaction was rolled back`,
      );
    }
    // The COMMIT's answer was lost (the connection died): if the completion landed, so did the writes.
    if (accepted && (await landedAnyway(host, store))) {
      settle(host, 'completed');
      return { done: true, value: produced as T };
    }
    if (presented && !accepted && isMovedRowConflict(err)) return { done: false, error: err };
    // The lease ran out while the transaction waited (the default adapter then closed its
    // connection): nothing was committed, and the lease is gone as far as this process can tell.
    if (!accepted && !host.holdsLease) throw abandonedError(host.lease.jobId, err);
    throw err;
  }
}

/** The error `job.transaction` throws when the lease ran out before its completion was accepted. */
export function abandonedError(jobId: string, cause: unknown): LeaseLostError {
  const error = new LeaseLostError(
    `the lease on job ${jobId} ran out while its transaction was open; the transaction was abandoned`,
  );
  (error as { cause?: unknown }).cause = cause;
  return error;
}

// serialization_failure, as the driver or as Leasehold's DatabaseError reports it.
function isMovedRowConflict(err: unknown): boolean {
  const e = err as { code?: unknown; sqlState?: unknown } | null;
  return e?.sqlState === '40001' || e?.code === '40001';
}

function settle(host: TransactionHost, outcome: 'completed' | 'lost'): void {
  host.reported = true;
  host.ownOutcome = outcome;
}

// Reads on the pool whether this claim's completion is recorded.
async function landedAnyway(host: TransactionHost, store: TransactionStore): Promise<boolean> {
  try {
    const landed = await findLandedOutcomes(store.pool, store.schema, [host.lease]);
    return landed.get(host.lease.jobId) === 'completed';
  } catch {
    return false;
  }
}

// A renewal already sent locks the job row; the completion waits for its answer instead of racing it.
async function renewalSettled(host: TransactionHost): Promise<void> {
  while (host.renewing && performance.now() < host.deadline) {
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** The `with` of `job.transaction`'s options, checked: an adapter from leasehold/kysely, /knex... */
export function transactionAdapter<Tx>(options: JobTransactionOptions<Tx>): TransactionAdapter<Tx> {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError(
      'options',
      'must be { with: adapter } (from leasehold/kysely, leasehold/knex...)',
    );
  }
  rejectUnknownOptions(options, ['with'], 'options');
  if (typeof options.with?.transaction !== 'function') {
    throw new ValidationError(
      'options.with',
      'must be an adapter such as kyselyAdapter(db) from leasehold/kysely',
    );
  }
  return options.with;
}
