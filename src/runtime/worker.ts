import { EventEmitter } from 'node:events';
import { plainListenConnection } from '../connection/leasehold-pool.js';
import { loadOtel } from '../observability/tracing.js';
import { leaseFromRow } from '../records/lease.js';
import { LeaseholdError } from '../shared/errors.js';
import { wakeupChannel } from '../storage/jobs/enqueue.js';
import type { ClaimedRow } from '../storage/leases/claim.js';
import { BatchItem } from './batch/batch-job.js';
import { BatchRunner } from './batch/batch-runner.js';
import { QueueRunner, type QueueRunnerHost } from './claim/queue-runner.js';
import { SlotPool } from './claim/slot-pool.js';
import { WorkerClaims } from './claim/worker-claims.js';
import { IdleRun, type IdleRunLimits, type IdleRunResult, resolveIdleRunLimits } from './idle-run.js';
import { WakeupListener } from './listener.js';
import {
  type ResolvedQueue,
  type ResolvedWorkerOptions,
  resolveWorkerOptions,
  type WorkerOptions,
} from './options.js';
import { OutageReport } from './outage.js';
import { OutcomeBatcher, type OutcomeResult } from './outcome-batcher.js';
import { handBackWrite, timeoutWrite } from './run/failure-outcome.js';
import { settlesWithin } from './run/grace.js';
import { idempotencyKeyOf } from './run/idempotency-key.js';
import { type AbortReason, ActiveJob, type EffectStore, jobStore } from './run/job-context.js';
import { type RunHost, runOne } from './run/job-run.js';
import { LeaseKeeper } from './run/lease-keeper.js';
import { explainLostOutcome, type LeaseLossReason, reportLossOnce } from './run/lease-loss.js';
import { StallWatch } from './stall-watch.js';
import { stopOnSignals } from './stop-signals.js';
import type { OutcomeDetail } from './telemetry-events.js';
import type { WorkerContext } from './worker-context.js';
import { countOutcome, type WorkerCounters, type WorkerEventMap, zeroCounters } from './worker-events.js';
import { assertLogger, logWorkerEvents } from './worker-logger.js';
import { WorkerMaintenance } from './worker-maintenance.js';

// The detail of an outcome that has none (a completion): one shared, frozen object, not one per job.
const NO_DETAIL: OutcomeDetail = Object.freeze({});

export type { WorkerOptions } from './options.js';
export type { WorkerCounters, WorkerEventMap } from './worker-events.js';

type WorkerState = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped';

/**
 * Runs handlers for jobs of some queues. Claims never exceed free slots and commit before a handler
 * starts; a lease keeper renews leases while handlers run (or on progress); outcomes are written in batched,
 * fenced statements; a LISTEN connection wakes idle queues and a periodic poll drains the table
 * whatever notifications were lost; a recovery sweep returns expired leases of any worker.
 */
export class Worker extends EventEmitter<WorkerEventMap> {
  /** The lease owner name of this worker. */
  readonly owner: string;
  /** Running totals since start. */
  readonly counters: WorkerCounters = zeroCounters();
  /** Every queue this worker serves, by name: the queues given by name and the tasks' queues. */
  readonly queues: readonly string[];
  /** The names of the tasks (from `defineTask`) this worker serves. */
  readonly tasks: readonly string[];

  readonly #context: WorkerContext;
  readonly #options: ResolvedWorkerOptions;
  readonly #queues = new Map<string, QueueRunner>();
  readonly #batcher: OutcomeBatcher;
  readonly #claims: WorkerClaims;
  readonly #keeper: LeaseKeeper;
  readonly #maintenance: WorkerMaintenance;
  readonly #listener: WakeupListener | null;
  readonly #stalls: StallWatch;
  readonly #outage: OutageReport;
  readonly #runs = new Map<ActiveJob, Promise<void>>();
  // The batch queues' runners (a queue without `batch` has none and never looks here).
  readonly #batches = new Map<QueueRunner, BatchRunner>();
  readonly #runHost: RunHost;
  // Where a job's effects, results and progress go: the same for every job, built once.
  readonly #store: EffectStore;
  #state: WorkerState = 'idle';
  #pollTimer: NodeJS.Timeout | null = null;
  #stopping: Promise<void> | null = null;
  #removeSignalHandlers: (() => void) | null = null;
  #idleRun: IdleRun | null = null;

  /** Builds a worker on a resolved context (`lh.worker(options)` passes its client's). */
  constructor(ctx: WorkerContext, options: WorkerOptions) {
    super();
    const worker = this;
    this.#context = ctx;
    this.#options = resolveWorkerOptions(options, ctx.backoff, ctx.listen);
    this.#store = jobStore(ctx, this.#options);
    this.owner = this.#options.owner;
    this.#runHost = {
      get batcher() {
        return worker.#batcher;
      },
      maxResultBytes: this.#options.maxResultBytes,
      get store() {
        return worker.#store;
      },
      takeTraceparent: (id) => this.#claims.takeTraceparent(id),
      count: (job, result, detail) => this.#count(job, result, detail),
    };
    this.queues = Object.freeze(this.#options.queues.map((q) => q.name));
    this.tasks = Object.freeze((options.tasks ?? []).map((task) => task.name));
    if (options.logger !== undefined) {
      assertLogger(options.logger, 'options.logger');
      logWorkerEvents(this, options.logger);
    }
    const slotPool = this.#options.slots === null ? null : new SlotPool(this.#options.slots);
    const host = this.#runnerHost();
    for (const config of this.#options.queues) {
      const q = new QueueRunner(config, host, slotPool);
      this.#queues.set(config.name, q);
      const { batch } = config;
      const release = (job: ActiveJob) => this.#keeper.untrack(job);
      if (batch) this.#batches.set(q, new BatchRunner(this.#runHost, { ...config, batch }, q, release));
    }
    this.#outage = new OutageReport(this.owner, ctx.pool, this, () => this.#wakeAll());
    const reportError = (err: unknown) => this.#outage.report(err);
    this.#claims = new WorkerClaims(ctx, this);
    this.#batcher = new OutcomeBatcher(
      ctx.pool,
      ctx.schema,
      this.#options.outcomeBatchDelayMs,
      reportError,
      (info) => this.emit('flushed', info),
    );
    this.#keeper = new LeaseKeeper(ctx.pool, ctx.schema, this.#options.queues, {
      aborted: (job, reason) => this.#onAborted(job, reason),
      stuck: (job) => {
        this.counters.stuck++;
        this.emit('stuck', job);
      },
      error: reportError,
    });
    this.#maintenance = new WorkerMaintenance(ctx, this.#options, {
      recovered: (result, dueInMs) => {
        this.counters.recovered += result.retried + result.dead;
        this.emit('recovered', result);
        // Recovered jobs are claimable now or after their (short) backoff: wake now, and again once
        // the last is due, instead of leaving those still in backoff to the next poll.
        this.#wakeAll();
        if (dueInMs > 0) setTimeout(() => this.#wakeAll(), dueInMs + 1).unref();
      },
      pruned: (result) => this.emit('pruned', result),
      scheduled: (result) => this.emit('scheduled', result),
      rotated: (result) => this.emit('rotated', result),
      aged: (result) => {
        this.emit('aged', result);
        this.#wakeAll(); // raised or released jobs may change what each queue claims next
      },
      error: reportError,
    });
    this.#stalls = new StallWatch(
      () => ctx.statements?.oldest() ?? null,
      Math.min(...this.#options.queues.map((q) => q.leaseMs)),
      (statement) => this.emit('stalled', statement),
    );
    this.#listener = this.#options.listen
      ? new WakeupListener({
          connection: ctx.listenVia ?? plainListenConnection(ctx.listenConnection),
          channel: wakeupChannel(ctx.schema),
          onWake: (queue) => this.#wake(queue),
          onConnected: () => this.#wakeAll(),
          onError: reportError,
        })
      : null;
  }

  /** Jobs running now, over all queues. */
  get activeCount(): number {
    return this.#runs.size;
  }

  /** Handler slots in all: the shared `slots` when set, else the sum of the queues' concurrency. */
  get slots(): number {
    return this.#options.slots ?? this.#options.queues.reduce((sum, q) => sum + q.concurrency, 0);
  }

  /** The LISTEN connection's server pid while connected (null when not listening). */
  get listenerPid(): number | null {
    return this.#listener?.backendPid ?? null;
  }

  /** Reaches the database, then starts claiming; rejects with nothing running (docs/api.md, "Starting"). */
  async start(): Promise<void> {
    await loadOtel(); // spans only when @opentelemetry/api is installed
    this.#begin('idle', 'starting'); // keeps a second start() out while the database is checked
    const { assertSchemaUsable } = await import('../migrations/migrator.js'); // not loaded by import 'leasehold'
    await assertSchemaUsable(this.#context.pool, this.#context.schema, 'start').catch((err: unknown) => {
      if (this.#state === 'starting') this.#state = 'idle';
      throw err;
    });
    if (this.#state !== 'starting') return; // stop() was called meanwhile: resolve, not started
    this.#begin('starting');
    this.#listener?.start();
    this.#maintenance.start();
    this.#pollTimer = setInterval(() => this.#wakeAll(), this.#options.pollIntervalMs);
    this.emit('started', { owner: this.owner, queues: this.queues, tasks: this.tasks });
    this.#wakeAll();
  }

  // What start() and runUntilIdle() share: the state check, then the stall watch and signals.
  #begin(from: WorkerState = 'idle', to: WorkerState = 'running'): void {
    if (this.#state !== from) {
      throw new LeaseholdError('WORKER_STATE', `worker ${this.owner} was already started or is running`);
    }
    this.#state = to;
    if (to === 'starting') return;
    this.#stalls.start();
    if (this.#options.handleSignals) this.#removeSignalHandlers = stopOnSignals(() => this.stop());
  }

  /**
   * Runs this worker's queues until none has a job claimable now (database time), or a bound is
   * hit, instead of `start()`: one recovery pass first (expired leases back to pending, claimable
   * at once), then the same claim loops, payload checks, renewals and fenced outcome batches as a
   * started worker, but no listener, poll timer or maintenance services; at the end, as at `stop()`,
   * unstarted leases are handed back. Afterwards the worker may run (or start) again.
   */
  async runUntilIdle(limits?: IdleRunLimits): Promise<IdleRunResult> {
    const bounds = resolveIdleRunLimits(limits);
    await loadOtel();
    this.#begin();
    const run = new IdleRun(bounds, this.counters, {
      quiet: () => [...this.#queues.values()].every((q) => q.quiet),
      wakeAll: () => this.#wakeAll(),
    });
    this.#idleRun = run;
    try {
      const moved = await run.recover(this.#context.pool, this.#context.schema);
      if (moved.retried + moved.dead > 0) this.emit('recovered', moved);
      this.emit('started', { owner: this.owner, queues: this.queues, tasks: this.tasks });
      run.check();
      await run.ended;
    } finally {
      run.end('stopped');
      await this.stop();
      this.#idleRun = null;
      if (!this.#batcher.abandoned) [this.#state, this.#stopping] = ['idle', null];
    }
    return run.result(this.counters);
  }

  /**
   * Stops claiming, lets running handlers finish for up to `shutdownTimeoutMs`, then aborts the
   * rest and hands their leases back (pending again at once, attempt refunded), and waits until
   * every outcome write is answered. Safe to call more than once.
   */
  stop(): Promise<void> {
    if (this.#state === 'idle' || this.#state === 'starting' || this.#state === 'stopped') {
      this.#state = 'stopped';
      return Promise.resolve();
    }
    this.#idleRun?.end('stopped');
    this.#stopping ??= this.#shutdown();
    return this.#stopping;
  }

  async #shutdown(): Promise<void> {
    this.#state = 'stopping';
    if (this.#pollTimer) clearInterval(this.#pollTimer);
    // Buffered jobs never started: hand them back at once (a claim still in flight adds its
    // rows to the buffer, handed back below once it returns).
    const handedBack: Promise<OutcomeResult>[] = [];
    const handBackBuffers = () => {
      for (const q of this.#queues.values()) {
        for (const row of q.drainBuffer()) handedBack.push(this.#handBack(q.config, row));
      }
    };
    handBackBuffers();
    for (const batch of this.#batches.values()) batch.flush(); // partial batches run now, not at their wait's end
    await Promise.all([this.#listener?.stop(), this.#maintenance.stop()]);
    await Promise.all([...this.#queues.values()].map((q) => q.pump));
    handBackBuffers();

    if (this.#runs.size > 0)
      await settlesWithin(Promise.all(this.#runs.values()), this.#options.shutdownTimeoutMs);
    const releases: Promise<OutcomeResult>[] = [];
    for (const job of this.#runs.keys()) {
      if (job.reported) continue;
      job.abort('shutdown');
      this.emit('aborted', job, 'shutdown');
      job.reported = true;
      // Hand the lease back: pending now, attempt refunded, since the job did not fail.
      releases.push(this.#batcher.snooze({ ...job.lease, delayMs: 0, handBack: 'shutdown' }));
    }
    // Outcome writes get their own grace period; if the database does not answer them in time,
    // stop() still returns: those jobs' leases expire and the recovery sweep takes them back.
    const written = Promise.all([...releases, ...handedBack]).then(() => this.#batcher.drained());
    if (!(await settlesWithin(written, Math.max(1000, this.#options.shutdownTimeoutMs)))) {
      this.#batcher.abandon();
      this.#outage.report(
        new Error('stop(): outcome writes unanswered at shutdown were abandoned; their leases will expire'),
      );
    }
    this.#keeper.stop();
    this.#stalls.stop();
    this.#outage.stop();
    this.#removeSignalHandlers?.();
    this.#removeSignalHandlers = null;
    this.#state = 'stopped';
  }

  #wakeAll(): void {
    for (const queue of this.#queues.keys()) this.#wake(queue);
  }

  #wake(queueName: string): void {
    if (this.#state === 'running') this.#queues.get(queueName)?.wake();
  }

  // What the per-queue claim loops need from this worker: they own the slot accounting, the
  // worker owns claiming, handler execution and outcome writes.
  #runnerHost(): QueueRunnerHost {
    const worker = this;
    return {
      get accepting() {
        return worker.#state === 'running';
      },
      claimBatchSize: this.#options.claimBatchSize,
      claim: (config, limit, sizing) => this.#claims.claim(config, limit, sizing, this.#idleRun),
      frontClaimDue: (queue) => this.#claims.frontClaimDue(queue),
      throttled: (queue) => this.#claims.throttled(queue),
      start: (runner, row, claimSentAt) => this.#start(runner, row, claimSentAt),
      handBack: (config, row) => this.#handBack(config, row),
      reportError: (err) => this.#outage.report(err),
      settled: () => this.#idleRun?.check(),
    };
  }

  // Returns a claimed job that never started: pending again at once, its attempt refunded.
  #handBack(config: ResolvedQueue, row: ClaimedRow): Promise<OutcomeResult> {
    this.#claims.takeTraceparent(row.id);
    const write = this.#batcher.snooze(handBackWrite(row, this.owner, config.name));
    return this.#idleRun ? this.#idleRun.handingBack(write) : write;
  }

  #start(q: QueueRunner, row: ClaimedRow, claimSentAt: number): void {
    const { config } = q;
    // A queue without `batch` reads one null here and nothing else of batches.
    const batch = config.batch === null ? undefined : this.#batches.get(q);
    const job = new (batch ? BatchItem : ActiveJob)(
      leaseFromRow(row, config.name, this.owner),
      idempotencyKeyOf(this.#context.schema, row.id, row.job_uid),
      claimSentAt,
      config.leaseMs,
      this.#keeper.marginFor(config.leaseMs),
      config.maxRuntimeMs,
      this.#store,
    );
    job.plain = row.plain === true;
    this.#keeper.track(job, config);
    const run = (batch ? batch.add(job as BatchItem) : runOne(this.#runHost, job, q)).finally(() => {
      this.#keeper.untrack(job);
      this.#runs.delete(job);
      q.outcomeAnswered();
    });
    this.#runs.set(job, run);
  }

  #onAborted(job: ActiveJob, reason: AbortReason): void {
    this.emit('aborted', job, reason);
    if (reason === 'cancelled') {
      // Not a lost lease: the operator ended the job. Counted as cancelled, never warned about.
      job.lossReported = true;
      this.counters.cancelled++;
    } else if (reason !== 'shutdown') this.#reportLoss(job, reason);
    if (reason !== 'max-runtime' || job.reported) return;
    // Past its maximum runtime, the run is recorded as a retryable time-out at once, while the
    // lease is still ours; the handler's slot stays taken until it returns.
    job.reported = true;
    const config = this.#queues.get(job.queue)?.config;
    if (!config) return;
    void this.#batcher
      .fail(timeoutWrite(job.lease, config))
      .then((result) => this.#count(job, result, { errorCode: 'TIMEOUT' }));
  }

  #count(job: ActiveJob, result: OutcomeResult, detail: OutcomeDetail = NO_DETAIL): void {
    countOutcome(this.counters, result);
    if (result === 'lost') {
      const cancelled = () => {
        job.abort('cancelled'); // late: the handler has returned, but the events say why it ended
        this.#onAborted(job, 'cancelled');
      };
      explainLostOutcome(job, this.#context, (reason) => this.#reportLoss(job, reason), cancelled);
    }
    this.emit('outcome', job, result, detail);
  }

  #reportLoss(job: ActiveJob, reason: LeaseLossReason): void {
    reportLossOnce(this, job, this.#queues.get(job.queue)?.config, reason, this.#keeper.timerLateMs());
  }
}
