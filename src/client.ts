import type pg from 'pg';
import type {
  ClaimOptions,
  EnqueueItem,
  EnqueueManyResult,
  EnqueueOptions,
  EnqueueResult,
  FailOptions,
  LeaseholdOptions,
  PruneOptions,
  Queryable,
} from './context/client-options.js';
import {
  assertOpen,
  closeContext,
  joining,
  type LeaseholdContext,
  publicCall,
  resolveContext,
} from './context/context.js';
import type { CombinedEnqueueCounts } from './context/enqueue-combiner.js';
import type { CancelOptions, CancelResult } from './operations/operator/cancel.js';
import type { DeadJobPage, ListDeadOptions } from './operations/operator/dead.js';
import type { Job } from './operations/operator/jobs.js';
import type { BlockedKey, BlockedKeysOptions, SkipOptions } from './operations/operator/ordering.js';
import type { ReplayFilter, ReplayOptions, ReplayResult } from './operations/operator/replay.js';
import { enqueue, enqueueMany } from './operations/producer/enqueue.js';
import { enqueueTask, enqueueTaskMany } from './operations/producer/enqueue-task.js';
import type { SendEventInput, SendEventResult } from './operations/producer/events.js';
import type { BlockedFlow, EnqueueFlowResult, FlowNode, FlowView } from './operations/producer/flows.js';
import type { ScheduleInfo, ScheduleOptions, SchedulerResult } from './operations/producer/schedules.js';
import {
  type EnqueueAndWaitOptions,
  enqueueAndWait,
  type WaitForOptions,
  type WaitForResult,
  waitFor,
} from './operations/producer/wait-for.js';
import type { PauseOptions } from './operations/queues/queue-settings.js';
import type { QueueConfig, QueueSettings, QueueSummary } from './operations/queues/queues.js';
import type { LeaseholdStats, StatsOptions } from './operations/queues/stats.js';
import type { HealthReport, HealthRules, OutstandingStatement } from './operations/schema/health.js';
import type { MigrateResult } from './operations/schema/migrate.js';
import type { PruneResult } from './operations/schema/prune.js';
import type { LaneRotationResult } from './operations/schema/rotate-lanes.js';
import {
  claim,
  complete,
  completeMany,
  type FailOutcome,
  fail,
  heartbeat,
  snooze,
} from './operations/worker/leases.js';
import { type RecoverOptions, recoverExpired } from './operations/worker/recovery.js';
import type { RefusalCount } from './operations/worker/refusals.js';
import type { RunUntilIdleOptions } from './operations/worker/run-until-idle.js';
import type { JobWithHistory } from './records/job-history.js';
import type { Lease } from './records/lease.js';
import type { IdleRunResult } from './runtime/idle-run.js';
import type { AnyTask, TaskPayload, TaskResult } from './runtime/task.js';
import { Worker, type WorkerOptions } from './runtime/worker.js';
import type { BackoffOptions } from './shared/config.js';

// The calls a producer or a worker never makes load on the first one (see operator-calls.ts).
const operatorCalls = () => import('./operator-calls.js');

// Reads a client's private context: set by the class's static block, the one place that can.
let readContext: (client: Leasehold) => LeaseholdContext;

/**
 * The context of a client, or `source` itself when it is one: for the code that is handed either
 * (the dashboard, the stats metrics, tests). The context stays off the client's public surface, as
 * it holds connection settings.
 */
export function contextOf(source: Leasehold | LeaseholdContext): LeaseholdContext {
  return source instanceof Leasehold ? readContext(source) : source;
}

export type {
  ClaimOptions,
  EnqueueItem,
  EnqueueOptions,
  EnqueueResult,
  FailOptions,
  LeaseholdOptions,
  PruneOptions,
} from './context/client-options.js';

/** One job of `lh.enqueueMany(task, items)`: its payload typed by the task. */
export type TaskItem<T extends AnyTask> = Omit<EnqueueItem, 'payload'> & { payload: TaskPayload<T> };

/**
 * The Leasehold client: enqueue work, claim it under an expiring lease, and report outcomes that
 * are accepted only while that lease is current. Every method forwards to the module of its call
 * (src/operations/), over the context resolved once from the options (src/context/context.ts). A file of
 * forwards only (scripts/forwards.mjs states the rule that lets it pass the length bound).
 */
export class Leasehold {
  /** The validated schema name. */
  readonly schema: string;
  /** The pool every statement runs on (unless a call passes its own client); pass it to metrics. */
  readonly pool: pg.Pool;
  readonly #context: LeaseholdContext;

  static {
    readContext = (client) => client.#context;
  }

  constructor(options: LeaseholdOptions = {}) {
    this.#context = resolveContext(options);
    this.schema = this.#context.schema;
    this.pool = this.#context.pool;
  }

  /** Resolved retry backoff. */
  get backoff(): Required<BackoffOptions> {
    return { ...this.#context.backoff };
  }

  /** Largest payload accepted, in JSON bytes. */
  get maxPayloadBytes(): number {
    return this.#context.maxPayloadBytes;
  }

  /** Default retention of succeeded jobs, in ms. */
  get succeededRetentionMs(): number {
    return this.#context.succeededRetentionMs;
  }

  /** False when statements run unnamed (behind a transaction-mode pooler). */
  get preparedStatements(): boolean {
    return this.#context.preparedStatements;
  }

  /** Whether this client's workers listen for wake-ups by default. */
  get listen(): boolean {
    return this.#context.listen;
  }

  /** Creates or upgrades the schema; safe to call from many processes at once. */
  migrate(): Promise<MigrateResult> {
    return publicCall(this.#context, 'migrate', () =>
      operatorCalls().then((calls) => calls.migrate(this.#context)),
    );
  }

  /**
   * What write combining did so far (all zero with `combineEnqueues: false`): statements sent by
   * `enqueue()` calls without `client`, those that carried several callers' rows, and rows.
   */
  combinedEnqueues(): CombinedEnqueueCounts {
    return (
      this.#context.enqueues?.counts() ?? {
        statements: 0,
        combinedStatements: 0,
        rows: 0,
        largestStatement: 0,
        waiting: 0,
      }
    );
  }

  /** Ends the pool if Leasehold created it; every later call rejects with `CLIENT_CLOSED`. Safe to call twice. */
  close(): Promise<void> {
    return closeContext(this.#context);
  }

  /**
   * Adds a job to `queue`, or to a task's queue: the payload's type is then checked against the
   * task at compile time and by its schema at run time (`ValidationError`, nothing written). With
   * `client`, the job joins that transaction. With `idempotencyKey`, a job already holding that key
   * in the queue is returned instead (`created: false`).
   */
  enqueue<T extends AnyTask>(
    task: T,
    payload: TaskPayload<T>,
    options?: EnqueueOptions,
  ): Promise<EnqueueResult>;
  enqueue(queue: string, payload: unknown, options?: EnqueueOptions): Promise<EnqueueResult>;
  enqueue(target: string | AnyTask, payload: unknown, options?: EnqueueOptions): Promise<EnqueueResult> {
    return publicCall(this.#context, 'enqueue', () =>
      typeof target === 'string'
        ? enqueue(this.#context, target, payload, options)
        : enqueueTask(this.#context, target, payload, options),
    );
  }

  /**
   * Adds many jobs to `queue` (or a task's queue, each payload checked as `enqueue` does) in one
   * statement, all or nothing; ids come back in input order.
   */
  enqueueMany<T extends AnyTask>(
    task: T,
    items: readonly TaskItem<T>[],
    options?: { client?: Queryable },
  ): Promise<EnqueueManyResult>;
  enqueueMany(
    queue: string,
    items: readonly EnqueueItem[],
    options?: { client?: Queryable },
  ): Promise<EnqueueManyResult>;
  enqueueMany(
    target: string | AnyTask,
    items: readonly EnqueueItem[],
    options?: { client?: Queryable },
  ): Promise<EnqueueManyResult> {
    return publicCall(this.#context, 'enqueueMany', () =>
      typeof target === 'string'
        ? enqueueMany(this.#context, target, items, options)
        : enqueueTaskMany(this.#context, target, items, options),
    );
  }

  /** Claims up to `limit` jobs of a queue in one statement and commits at once. */
  claim(options: ClaimOptions): Promise<Lease[]> {
    return publicCall(this.#context, 'claim', () => claim(this.#context, options));
  }

  /** Extends a lease from now; false when it is lost (expired, recovered or reclaimed). */
  heartbeat(lease: Lease, options?: { leaseMs?: number; client?: Queryable }): Promise<boolean> {
    return publicCall(this.#context, 'heartbeat', () => heartbeat(this.#context, lease, options));
  }

  /** Ends this run; the job is claimable again after `delayMs`, no attempt spent. False when the lease was lost. */
  snooze(lease: Lease, delayMs: number, options?: { client?: Queryable }): Promise<boolean> {
    return publicCall(this.#context, 'snooze', () => snooze(this.#context, lease, delayMs, options));
  }

  /** Marks the job succeeded; false when the lease was lost and nothing changed. */
  complete(lease: Lease, options?: { client?: Queryable }): Promise<boolean> {
    return publicCall(this.#context, 'complete', () => complete(this.#context, lease, options));
  }

  /**
   * Completes many leases in one fenced statement; returns the ids whose completion was accepted
   * (the others were fenced out and changed nothing).
   */
  completeMany(leases: readonly Lease[], options?: { client?: Queryable }): Promise<Set<string>> {
    return publicCall(this.#context, 'completeMany', () => completeMany(this.#context, leases, options));
  }

  /**
   * Records a failed attempt: `retry` (pending again after backoff), `dead` (attempts spent or
   * not retryable; kept, never deleted) or `lost` (the lease was lost; nothing changed).
   */
  fail(lease: Lease, error: unknown, options?: FailOptions): Promise<FailOutcome> {
    return publicCall(this.#context, 'fail', () => fail(this.#context, lease, error, options));
  }

  /**
   * Returns expired leases to `pending` (after backoff) or `dead` (attempts spent), in batches of
   * `batchSize`, each its own short transaction, until none is left or `limit` jobs were moved.
   */
  recoverExpired(options?: RecoverOptions): Promise<{ retried: number; dead: number }> {
    return publicCall(this.#context, 'recoverExpired', () => recoverExpired(this.#context, options));
  }

  /**
   * One lane rotation pass now (workers run one every 3 s): moves what is left in the hot lanes
   * due to be emptied, then truncates the drained ones. See docs/storage.md.
   */
  rotateLanes(): Promise<LaneRotationResult> {
    return publicCall(this.#context, 'rotateLanes', () =>
      operatorCalls().then((calls) => calls.rotateLanes(this.#context)),
    );
  }

  /** Reads one job; null when none has that id. With `history: true`, adds its history in order. */
  getJob(id: string | bigint | number): Promise<Job | null>;
  getJob(id: string | bigint | number, options: { history: true }): Promise<JobWithHistory | null>;
  getJob(id: string | bigint | number, options?: { history?: boolean }): Promise<Job | JobWithHistory | null>;
  getJob(
    id: string | bigint | number,
    options?: { history?: boolean },
  ): Promise<Job | JobWithHistory | null> {
    return publicCall(this.#context, 'getJob', () =>
      operatorCalls().then((calls) => calls.getJob(this.#context, id, options)),
    );
  }

  /** Pages through dead jobs, newest death first, with their error summary (never payloads). */
  listDead(options: ListDeadOptions = {}): Promise<DeadJobPage> {
    return publicCall(this.#context, 'listDead', () =>
      operatorCalls().then((calls) => calls.listDead(this.#context, options)),
    );
  }

  /**
   * Returns dead jobs to `pending` with the same id, a fresh attempt budget and their history kept
   * (plus a `replayed` event). An id list is all or nothing (`JobStateError`, `JobNotFoundError`);
   * a filter replays in bounded batches, reporting progress.
   */
  replay(
    target: readonly (string | bigint | number)[] | ReplayFilter,
    options: ReplayOptions,
  ): Promise<ReplayResult> {
    return publicCall(this.#context, 'replay', () =>
      operatorCalls().then((calls) =>
        calls.replay(this.pool, this.schema, target, joining(this.#context, options)),
      ),
    );
  }

  /** Cancels a pending or running job (a running one's worker is fenced out); `JobStateError` when finished. */
  cancel(id: string | bigint | number, options: CancelOptions): Promise<CancelResult> {
    return publicCall(this.#context, 'cancel', () =>
      operatorCalls().then((calls) => calls.cancel(this.#context, id, joining(this.#context, options))),
    );
  }

  /** Creates or changes a queue's settings: owner, retention, paused, per-key limit, aging. */
  configureQueue(queue: string, config: QueueConfig): Promise<QueueSettings> {
    return publicCall(this.#context, 'configureQueue', () =>
      operatorCalls().then((calls) => calls.configureQueueSettings(this.#context, queue, config)),
    );
  }

  /**
   * Gives up on a dead job so that its ordering key moves on: dead -> cancelled, recorded as a
   * `key_skipped` event (who, why); the key's next job becomes claimable. `JobStateError` unless dead.
   */
  skip(id: string | bigint | number, options: SkipOptions): Promise<void> {
    return publicCall(this.#context, 'skip', () =>
      operatorCalls().then((calls) => calls.skip(this.#context, id, options)),
    );
  }

  /** Ordering keys blocked by a dead head, longest blocked first, with how many jobs wait behind. */
  blockedKeys(options: BlockedKeysOptions = {}): Promise<BlockedKey[]> {
    return publicCall(this.#context, 'blockedKeys', () =>
      operatorCalls().then((calls) => calls.blockedKeys(this.#context, options)),
    );
  }

  /**
   * Opens `queue`'s payloads to the dashboard's search (the first `prefixChars` characters of each
   * payload's JSON text, 1 to 4,096), or closes them with `null`. Off by default: payloads may hold
   * personal data.
   */
  setPayloadSearch(queue: string, prefixChars: number | null): Promise<void> {
    return publicCall(this.#context, 'setPayloadSearch', () =>
      operatorCalls().then((calls) => calls.setPayloadSearch(this.pool, this.schema, queue, prefixChars)),
    );
  }

  /**
   * Stops claims from `queue`; running jobs finish. An unknown queue (a typo) is refused with
   * `QueueNotFoundError` naming the closest known ones, unless `{ create: true }`.
   */
  pauseQueue(queue: string, options?: PauseOptions): Promise<QueueSettings> {
    return publicCall(this.#context, 'pauseQueue', () =>
      operatorCalls().then((calls) => calls.setQueuePaused(this.#context, queue, true, options)),
    );
  }

  /** Lets `queue` be claimed again; an unknown queue is refused as `pauseQueue` refuses it. */
  resumeQueue(queue: string, options?: PauseOptions): Promise<QueueSettings> {
    return publicCall(this.#context, 'resumeQueue', () =>
      operatorCalls().then((calls) => calls.setQueuePaused(this.#context, queue, false, options)),
    );
  }

  /**
   * Forgets a known queue that no longer exists (no job in any state, no schedule): its settings go
   * and it leaves `listQueues()` and `stats()`. False when it still has jobs or a schedule.
   */
  forgetQueue(queue: string): Promise<boolean> {
    return publicCall(this.#context, 'forgetQueue', () =>
      operatorCalls().then((calls) => calls.forgetQueue(this.pool, this.schema, queue)),
    );
  }

  /**
   * Every known queue (with jobs, settings, a schedule, or recorded when its last job was removed,
   * with zeros): counts, oldest claimable age, owner, paused, and
   * `unattended` when claimable work waits past `unattendedAfterMs` (default 60 s) with no live lease.
   */
  listQueues(options?: { limit?: number; unattendedAfterMs?: number }): Promise<QueueSummary[]> {
    return publicCall(this.#context, 'listQueues', () =>
      operatorCalls().then((calls) => calls.queueSummaries(this.pool, this.schema, options)),
    );
  }

  /**
   * One retention pass now: removes succeeded jobs past their retention, and dead or cancelled jobs
   * past their queue's dead retention (each leaving a tombstone), in bounded batches.
   */
  prune(options?: PruneOptions): Promise<PruneResult> {
    return publicCall(this.#context, 'prune', () =>
      operatorCalls().then((calls) => calls.prune(this.#context, options)),
    );
  }

  /** Lost-fence attempts counted so far, per queue and operation. */
  leaseRefusals(): Promise<RefusalCount[]> {
    return publicCall(this.#context, 'leaseRefusals', () =>
      operatorCalls().then((calls) => calls.leaseRefusals(this.#context)),
    );
  }

  /** Database-derived gauges per queue in one bounded, index-served snapshot: safe to poll every few seconds. */
  stats(options: StatsOptions = {}): Promise<LeaseholdStats> {
    return publicCall(this.#context, 'stats', () =>
      operatorCalls().then((calls) => calls.readStats(this.pool, this.schema, options)),
    );
  }

  /** Checks health rules (old work, dead jobs, old transactions, table bloat); `ok` false lists each failure. */
  checkHealth(rules: HealthRules = {}): Promise<HealthReport> {
    return publicCall(this.#context, 'checkHealth', () =>
      operatorCalls().then((calls) =>
        calls.checkHealth(this.pool, this.schema, rules, () => this.oldestStatement()),
      ),
    );
  }

  /**
   * The statement waiting longest for its answer on the pool Leasehold created, or null (none
   * outstanding, or a pool of your own); answers without the database.
   */
  oldestStatement(): OutstandingStatement | null {
    return this.#context.statements?.oldest() ?? null;
  }

  /** Creates a worker that runs handlers for the given queues and tasks. Call `start()` on it. */
  worker(options: WorkerOptions): Worker {
    return new Worker(assertOpen(this.#context, 'worker'), options);
  }

  /**
   * Creates or updates the cron schedule `name` (kept in the database, so every process sees it):
   * each tick enqueues exactly one job to the task or queue, fired by every worker's scheduler.
   * Cron, zone, payload (by the task's schema) and job fields are checked now (`ValidationError`).
   */
  schedule(name: string, options: ScheduleOptions): Promise<ScheduleInfo> {
    return publicCall(this.#context, 'schedule', () =>
      operatorCalls().then((calls) => calls.schedule(this.#context, name, options)),
    );
  }

  /** Removes a schedule (jobs it fired stay); false when none had that name. */
  unschedule(name: string): Promise<boolean> {
    return publicCall(this.#context, 'unschedule', () =>
      operatorCalls().then((calls) => calls.unschedule(this.#context, name)),
    );
  }

  /** Every schedule in name order, with its next and last tick and paused flag. */
  schedules(options?: { limit?: number }): Promise<ScheduleInfo[]> {
    return publicCall(this.#context, 'schedules', () =>
      operatorCalls().then((calls) => calls.listSchedules(this.#context, options)),
    );
  }

  /** Stops a schedule firing; `ValidationError` when none has that name. */
  pauseSchedule(name: string): Promise<ScheduleInfo> {
    return publicCall(this.#context, 'pauseSchedule', () =>
      operatorCalls().then((calls) => calls.setPaused(this.#context, name, true)),
    );
  }

  /** Lets a paused schedule fire again, from its next tick on (ticks named while paused do not fire). */
  resumeSchedule(name: string): Promise<ScheduleInfo> {
    return publicCall(this.#context, 'resumeSchedule', () =>
      operatorCalls().then((calls) => calls.setPaused(this.#context, name, false)),
    );
  }

  /** One scheduler pass now (workers run one every second): fires every due tick, one job each. */
  runSchedules(): Promise<SchedulerResult> {
    return publicCall(this.#context, 'runSchedules', () =>
      operatorCalls().then((calls) => calls.runSchedules(this.#context)),
    );
  }

  // Flows (issue 16): jobs that depend on jobs.

  /**
   * Enqueues a graph of jobs in one statement, all or nothing (joining `client`'s transaction): a
   * job runs once every job it `dependsOn` succeeded. Cycles, unknown or duplicate refs and graphs
   * over the bounds are a `ValidationError`, nothing written. Returns the job ids by ref.
   */
  enqueueFlow(nodes: readonly FlowNode[], options?: { client?: Queryable }): Promise<EnqueueFlowResult> {
    return publicCall(this.#context, 'enqueueFlow', () =>
      operatorCalls().then((calls) => calls.enqueueFlow(this.#context, nodes, options)),
    );
  }

  /** The flow holding job `id`: every node with its status and parents; null when none. */
  getFlow(id: string | bigint | number): Promise<FlowView | null> {
    return publicCall(this.#context, 'getFlow', () =>
      operatorCalls().then((calls) => calls.getFlow(this.#context, id)),
    );
  }

  /** Flows stalled on a dead or cancelled job, longest stalled first: replay the job to resume. */
  blockedFlows(options?: { limit?: number }): Promise<BlockedFlow[]> {
    return publicCall(this.#context, 'blockedFlows', () =>
      operatorCalls().then((calls) => calls.blockedFlows(this.#context, options)),
    );
  }

  /**
   * Sends event `name` with `key` and a JSON `payload` (at most 1 MiB): every job waiting on that
   * name and key (`job.waitForEvent`) resumes with it, once; a wait that begins within 24 h after
   * finds it too. With `client`, sent in that transaction (a rollback wakes nothing).
   */
  sendEvent(name: string, event: SendEventInput, options?: { client?: Queryable }): Promise<SendEventResult> {
    return publicCall(this.#context, 'sendEvent', () =>
      import('./operations/producer/events.js').then((events) =>
        events.sendEvent(this.#context, name, event, options),
      ),
    );
  }

  /**
   * Recovers expired leases, then runs the given queues and tasks (as a worker would) until none
   * has a job claimable now (database time) or `maxJobs` / `maxMs` is hit; unstarted leases are
   * handed back. Resolves with what ran: `{ succeeded, failed, dead, snoozed, lost, recovered, endedBy }`.
   */
  runUntilIdle(options: RunUntilIdleOptions): Promise<IdleRunResult> {
    return publicCall(this.#context, 'runUntilIdle', () =>
      operatorCalls().then((calls) => calls.runUntilIdle(this.#context, options)),
    );
  }

  /**
   * Resolves `{ id, status: 'succeeded', result }` once the job has succeeded; rejects with
   * `JobDeadError` / `JobCancelledError` (its last error summary), `JobNotFoundError`,
   * `WaitTimeoutError` after `timeoutMs`, or `WaitAbortedError` when `signal` aborts. Wakes on a
   * notification from the statement that ends the job, and polls (1 s) in case one is lost.
   */
  waitFor<Result = unknown>(
    id: string | bigint | number,
    options?: WaitForOptions,
  ): Promise<WaitForResult<Result>> {
    return publicCall(
      this.#context,
      'waitFor',
      () => waitFor(this.#context, id, options) as Promise<WaitForResult<Result>>,
    );
  }

  /** Enqueues, then waits for the job as `waitFor` does; for a task, `result` is typed by its handler. */
  enqueueAndWait<T extends AnyTask>(
    task: T,
    payload: TaskPayload<T>,
    options?: EnqueueAndWaitOptions,
  ): Promise<WaitForResult<TaskResult<T>>>;
  enqueueAndWait(queue: string, payload: unknown, options?: EnqueueAndWaitOptions): Promise<WaitForResult>;
  enqueueAndWait(
    target: string | AnyTask,
    payload: unknown,
    options?: EnqueueAndWaitOptions,
  ): Promise<WaitForResult> {
    return publicCall(this.#context, 'enqueueAndWait', () =>
      enqueueAndWait(this.#context, target, payload, options),
    );
  }
}
