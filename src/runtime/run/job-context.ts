import type pg from 'pg';
import type { Lease } from '../../records/lease.js';
import type { Queryable } from '../../storage/db.js';
import { readParents } from '../../storage/flows/flow-read.js';
import { type EffectHost, type EffectSpec, runEffect } from '../durable/effects.js';
import { type InvokeOptions, invokeChild, type JobInvoke } from '../durable/invoke.js';
import { type StepHost, StepRun, sleepMs, sleepUntilDate } from '../durable/steps.js';
import {
  EVENT_RETENTION_MS,
  type EventWaitResult,
  eventName,
  type WaitForEventOptions,
  waitOptions,
} from '../durable/wait-event.js';
import { type AbortReason, abortError } from './abort-error.js';
import { SnoozeError } from './job-errors.js';
import { type OutputLimits, progressText } from './job-output.js';
import {
  type JobTransactionOptions,
  poolTransactions,
  runJobTransaction,
  type TransactionAdapter,
  transactionAdapter,
} from './job-transaction.js';

/**
 * `job.transaction`: runs `fn` in one transaction committed together with this job's fenced
 * completion (both or neither). Without options `fn` gets a `pg` client of the worker's pool; with
 * `{ with: adapter }` (from `leasehold/kysely`, `leasehold/knex`...) that library's transaction.
 * A refused completion rolls `fn`'s writes back and throws `LeaseLostError` (outcome `lost`).
 */
export interface JobTransaction {
  <T>(fn: (client: pg.PoolClient) => Promise<T> | T): Promise<T>;
  <Tx, T>(fn: (tx: Tx) => Promise<T> | T, options: JobTransactionOptions<Tx>): Promise<T>;
}

/** A parent of a flow job, as `job.parents()` returns it. */
export interface JobParent {
  /** The parent's job id. */
  id: string;
  /** Its ref in the flow. */
  ref: string;
  /** 'succeeded', or 'dead' / 'cancelled' (a child with onParentDead 'run'), or 'removed' by retention. */
  status: string;
  /** The parent handler's return value (finished_jobs.result); null unless it succeeded. */
  result: unknown;
}

export type { JobInvoke } from '../durable/invoke.js';
export type { AbortReason } from './abort-error.js';

/** What a handler sees of the job it runs; `Payload` is a task's payload type (see `defineTask`). */
export interface JobContext<Payload = unknown> {
  /** The job's id. */
  readonly id: string;
  /** The queue it came from. */
  readonly queue: string;
  /** The job's data (for a task with a schema, the schema's output for the stored payload). */
  readonly payload: Payload;
  /** This attempt, from 1. */
  readonly attempt: number;
  /** Attempts allowed in all. */
  readonly maxAttempts: number;
  /** The fencing token of this claim. */
  readonly token: string;
  /** The lease owner (this worker). */
  readonly owner: string;
  /** Stable across every attempt of this job: pass it to downstreams that deduplicate. */
  readonly idempotencyKey: string;
  /**
   * Aborted when the job is cancelled while it runs, its lease is lost or about to lapse, at the
   * maximum runtime, or at shutdown. Its `reason` says which: a `LeaseholdError` with code
   * `CANCELLED` or `SHUTDOWN`, else a `LeaseLostError` (`LEASE_LOST`).
   */
  readonly signal: AbortSignal;
  /**
   * Reports progress, earning the next lease extension; false once the lease is lost. A `detail`
   * (JSON, at most the worker's `maxProgressBytes`, else a `ValidationError`) is stored with that
   * extension, in the same fenced statement (within about a second), and shown by
   * `getJob(id).progress`: the latest one wins.
   */
  progress(detail?: unknown): Promise<boolean>;
  /** Ends this run and asks to run again after `delayMs` without spending an attempt. */
  snooze(delayMs: number): never;
  /**
   * Runs an external side effect through the effects ledger: its intent is recorded before
   * `perform` and its result after, both fenced by this lease (`LeaseLostError` when it is gone).
   * A later attempt gets a recorded result back without performing again, and an outcome left
   * unknown goes to `reconcile` (or, without it, ends the job dead with `UNCERTAIN_EFFECT`).
   */
  readonly effect: <T>(name: string, spec: EffectSpec<T>) => Promise<T>;
  /**
   * A durable step: runs `fn` once per job and records its JSON result (fenced by this lease, at
   * most `maxResultBytes`) before returning it; a later attempt gets the recorded result back
   * without running `fn`. Repeated names are numbered in call order (`charge#0`, `charge#1`); a
   * resumed handler calling steps in another order gets `StepOrderError` (`STEP_ORDER`, dead).
   */
  readonly step: <T>(name: string, fn: () => Promise<T> | T) => Promise<T>;
  /**
   * A durable sleep: its wake time (`ms` from now, database time) is recorded once as a step; the
   * job is handed back holding no lease and spending no attempt, and resumes after it, past the
   * steps before. Returns at once when the recorded wake time has passed.
   */
  readonly sleep: (name: string, ms: number) => Promise<void>;
  /** `job.sleep` until a point in time (a Date), recorded once as a step. */
  readonly sleepUntil: (name: string, at: Date) => Promise<void>;
  /**
   * Waits, as a recorded step, for the event `name` with `key` (`lh.sendEvent`): the job is handed
   * back holding no lease and spending no attempt until the event is sent or `timeoutMs` passes.
   * Resolves `{ timedOut: false, payload }` or `{ timedOut: true }`, the same on every resume.
   */
  readonly waitForEvent: <P = unknown>(
    name: string,
    options: WaitForEventOptions,
  ) => Promise<EventWaitResult<P>>;
  /**
   * Enqueues a child job (a task, its payload checked, or a queue name) as a recorded step, and
   * resolves with its result once it succeeds: meanwhile this job is handed back holding no lease
   * and spending no attempt. A retried job finds the same child. A dead or cancelled child throws
   * `InvokedJobDeadError` / `InvokedJobCancelledError` (codes `JOB_DEAD`, `JOB_CANCELLED`).
   */
  readonly invoke: JobInvoke;
  /**
   * Runs `fn` in one transaction committed together with this job's completion: either both land
   * or neither (exactly-once effects on your own tables). See `JobTransaction`.
   */
  readonly transaction: JobTransaction;
  /** This job's parents in its flow (ids, statuses, results), read in one query when called; [] outside a flow. */
  parents(): Promise<JobParent[]>;
}

/** The handler's tools of a job context, as ActiveJob makes them on first use. */
type JobTools = Pick<
  JobContext,
  'effect' | 'step' | 'sleep' | 'sleepUntil' | 'waitForEvent' | 'invoke' | 'transaction'
>;

/**
 * Where a job's effects are recorded, the pool its own transactions check out from, and the
 * bounds of its result and progress details.
 */
export interface EffectStore extends OutputLimits {
  readonly db: Queryable;
  readonly schema: string;
  readonly pool: pg.Pool;
}

/** A worker's `EffectStore`: its context's pool and schema, and its result and progress bounds. */
export function jobStore(ctx: { pool: pg.Pool; schema: string }, limits: OutputLimits): EffectStore {
  const { maxResultBytes, maxProgressBytes } = limits;
  return { db: ctx.pool, schema: ctx.schema, pool: ctx.pool, maxResultBytes, maxProgressBytes };
}

/**
 * The worker's bookkeeping for one running job. Times are from `performance.now()`, a monotonic
 * clock: the worker measures only durations, so its wall clock can be wrong without effect.
 */
export class ActiveJob implements JobContext {
  readonly id: string;
  readonly queue: string;
  /** Replaced by the schema's output before a task's handler runs. */
  payload: unknown;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly token: string;
  readonly owner: string;
  readonly idempotencyKey: string;
  readonly lease: Lease;
  // Created on first use: most handlers of short jobs never look at their signal, and an
  // AbortController per job is a measurable share of a no-op job's cost.
  #controller: AbortController | null = null;
  readonly #store: EffectStore;

  /** When the run started. */
  readonly startedAt: number;
  /** When the last extension (or the claim) was sent: the lease runs from no earlier than this. */
  lastRenewalSentAt: number;
  /** When the worker must consider the lease gone: safely before the database does. */
  deadline: number;
  /** When the run passes its maximum runtime. */
  readonly runtimeLimitAt: number;
  /** Progress reported since the last extension was sent. */
  progressed = false;
  /** The latest progress detail (JSON text) not yet sent with an extension; null when none. */
  progressDetail: string | null = null;
  /** An extension is in flight. */
  renewing = false;
  /** Why the signal was aborted, once it is. */
  abortReason: AbortReason | null = null;
  /**
   * Its claim saw no ordering key, key slot or flow children: the worker completes it with the
   * plain completion (storage/leases/complete.ts), which checks this again.
   */
  plain = false;
  /** An outcome for this run was written or queued; later results are dropped. */
  reported = false;
  /** The handler has returned or thrown. */
  settled = false;
  /** The worker already reported this job as stuck. */
  stuckReported = false;
  /** The worker already reported this run's lost lease (once per run). */
  lossReported = false;
  /** `job.transaction` is open: renewed as if it reported progress. */
  transacting = false;
  /** `job.transaction` is presenting the completion: no renewal may race it. */
  completing = false;
  /** The outcome `job.transaction` settled; the worker counts it instead of completing. */
  ownOutcome: 'completed' | 'lost' | null = null;

  readonly #maxProgressBytes: number;
  /**
   * The handler's tools (effect, step, sleep, waitForEvent, invoke, transaction), made on first use and
   * kept: a plain job that calls none of them allocates none of their closures.
   */
  #tools: Partial<JobTools> | null = null;
  // Made on the first step call: a job that calls none reads and writes nothing for steps.
  #steps: StepRun | null = null;
  #ownPool: TransactionAdapter<pg.PoolClient> | null = null;

  constructor(
    lease: Lease,
    idempotencyKey: string,
    claimSentAt: number,
    leaseMs: number,
    margin: number,
    maxRuntimeMs: number,
    store: EffectStore,
  ) {
    this.lease = lease;
    this.id = lease.jobId;
    this.queue = lease.queue;
    this.payload = lease.payload;
    this.attempt = lease.attempt;
    this.maxAttempts = lease.maxAttempts;
    this.token = lease.token;
    this.owner = lease.owner;
    this.idempotencyKey = idempotencyKey;
    this.#store = store;
    this.startedAt = performance.now();
    this.lastRenewalSentAt = claimSentAt;
    this.deadline = claimSentAt + leaseMs - margin;
    this.runtimeLimitAt = this.startedAt + maxRuntimeMs;
    this.#maxProgressBytes = store.maxProgressBytes;
  }

  // Each tool is a getter returning the same function on every read, bound to this run, so that
  // `const { step } = job` works as well as `job.step(...)`.
  #tool<K extends keyof JobTools>(name: K, make: () => JobTools[K]): JobTools[K] {
    this.#tools ??= {};
    this.#tools[name] ??= make();
    return this.#tools[name] as JobTools[K];
  }

  get effect(): JobTools['effect'] {
    return this.#tool('effect', () => (name, spec) => runEffect(this.#leaseHost(), name, spec));
  }

  // What the effects ledger and the steps read of this run: where to write, the lease that fences
  // each write, and whether this process still holds it. One object for both (EffectHost, StepHost).
  #leaseHost(): EffectHost & StepHost {
    const job = this;
    const store = this.#store;
    return {
      db: store.db,
      schema: store.schema,
      lease: job.lease,
      idempotencyKey: job.idempotencyKey,
      maxResultBytes: store.maxResultBytes,
      get holdsLease() {
        return job.holdsLease;
      },
      get deadline() {
        return job.deadline;
      },
      lostLease: () => job.abort('lease-lost'),
    };
  }

  #stepRun(): StepRun {
    this.#steps ??= new StepRun(this.#leaseHost());
    return this.#steps;
  }

  get step(): JobTools['step'] {
    return this.#tool(
      'step',
      () =>
        (name, fn, ...options: unknown[]) =>
          this.#stepRun().step(name, fn, options[0]),
    );
  }

  get sleep(): JobTools['sleep'] {
    return this.#tool('sleep', () => async (name, ms) => this.#stepRun().sleep(name, { ms: sleepMs(ms) }));
  }

  get sleepUntil(): JobTools['sleepUntil'] {
    return this.#tool(
      'sleepUntil',
      () => async (name, at) => this.#stepRun().sleep(name, { at: sleepUntilDate(at) }),
    );
  }

  get waitForEvent(): JobTools['waitForEvent'] {
    return this.#tool('waitForEvent', () => async <P>(name: string, options: WaitForEventOptions) => {
      const { key, timeoutMs } = waitOptions(options);
      const ended = await this.#stepRun().waitForEvent(eventName(name), key, timeoutMs, EVENT_RETENTION_MS);
      return ended as EventWaitResult<P>;
    });
  }

  get invoke(): JobInvoke {
    return this.#tool(
      'invoke',
      () =>
        (async (target: unknown, payload: unknown, options?: InvokeOptions) =>
          this.#stepRun().invoke(await invokeChild(target, payload, options))) as JobInvoke,
    );
  }

  get transaction(): JobTransaction {
    return this.#tool(
      'transaction',
      () =>
        (async <Tx, T>(fn: (tx: Tx) => Promise<T> | T, options?: JobTransactionOptions<Tx>) => {
          this.#ownPool ??= poolTransactions(this.#store.pool, () => this.deadline);
          const adapter = (
            options === undefined ? this.#ownPool : transactionAdapter(options)
          ) as TransactionAdapter<Tx>;
          return runJobTransaction(this, this.#store, fn, adapter);
        }) as JobTransaction,
    );
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.abortReason !== null) this.#controller.abort(this.#abortError());
    }
    return this.#controller.signal;
  }

  /** The lease is still ours, as far as this process can tell. */
  get holdsLease(): boolean {
    return this.abortReason === null && performance.now() < this.deadline;
  }

  /** The database refused this run's write: its lease is gone (aborts the signal). */
  lostLease(): void {
    this.abort('lease-lost');
  }

  progress(detail?: unknown): Promise<boolean> {
    let text: string | undefined;
    try {
      text = progressText(detail, this.#maxProgressBytes);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!this.holdsLease) return Promise.resolve(false);
    this.progressed = true;
    if (text !== undefined) this.progressDetail = text;
    return Promise.resolve(true);
  }

  snooze(delayMs: number): never {
    throw new SnoozeError(delayMs);
  }

  parents(): Promise<JobParent[]> {
    return readParents(this.#store.db, this.#store.schema, this.id);
  }

  /** Aborts the handler's signal once, recording why. */
  abort(reason: AbortReason): void {
    if (this.abortReason !== null) return;
    this.abortReason = reason;
    this.#controller?.abort(this.#abortError());
  }

  #abortError(): Error {
    return abortError(this.id, this.abortReason ?? 'lease-lost');
  }
}
