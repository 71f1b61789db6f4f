import { EventEmitter } from 'node:events';
import type pg from 'pg';
import type { Leasehold } from '../client.js';
import { LeaseholdError } from '../errors.js';
import { type RecoveryResult, RecoveryService } from '../maintenance/recovery.js';
import {
  DEFAULT_PRUNE_BATCH,
  DEFAULT_PRUNE_LIMIT,
  type PruneResult,
  prunePass,
  RetentionService,
} from '../maintenance/retention.js';
import { type ClaimedRow, claimJobs } from '../storage/claim.js';
import { wakeupChannel } from '../storage/enqueue.js';
import { describeError } from './error-details.js';
import { type AbortReason, ActiveJob } from './job-context.js';
import { classifyFailure } from './job-errors.js';
import { LeaseKeeper } from './lease-keeper.js';
import { WakeupListener } from './listener.js';
import {
  type ResolvedQueue,
  type ResolvedWorkerOptions,
  resolveWorkerOptions,
  type WorkerOptions,
} from './options.js';
import { OutcomeBatcher, type OutcomeResult } from './outcome-batcher.js';

export type { WorkerOptions } from './options.js';

/** Running totals of one worker since it started. */
export interface WorkerCounters {
  claimed: number;
  completed: number;
  retried: number;
  dead: number;
  snoozed: number;
  /** Outcomes the database refused (the lease was no longer current) or never sent (lease lapsed). */
  lost: number;
  /** Jobs whose handler ignored an aborted signal past the grace period. */
  stuck: number;
  /** Expired leases this worker's recovery sweep moved (from any worker). */
  recovered: number;
}

/** Events a worker emits. */
export interface WorkerEventMap {
  /** A job's outcome was accepted. */
  outcome: [job: ActiveJob, result: OutcomeResult];
  /** A job's signal was aborted (lease lost or lapsing, maximum runtime, shutdown). */
  aborted: [job: ActiveJob, reason: AbortReason];
  /** A handler kept running after its signal was aborted; its slot stays taken until it returns. */
  stuck: [job: ActiveJob];
  /** The recovery sweep moved expired leases. */
  recovered: [result: RecoveryResult];
  /** A retention pass removed finished or expired-retention jobs. */
  pruned: [result: PruneResult];
  /** An internal error (database unavailable, listener dropped); the worker retries by itself. */
  error: [err: unknown];
}

interface QueueState {
  config: ResolvedQueue;
  /** Handlers running now. */
  active: number;
  /** Jobs whose handler settled but whose outcome write is not answered yet. */
  awaiting: number;
  /** More work may be claimable: claim when a slot is free. */
  wanted: boolean;
  pump: Promise<void> | null;
  pumpScheduled: boolean;
  claimFailures: number;
  /** Claimed jobs waiting for a free slot (only with `prefetch`); their leases are already running. */
  buffer: Buffered[];
}

interface Buffered {
  row: ClaimedRow;
  claimSentAt: number;
}

type WorkerState = 'idle' | 'running' | 'stopping' | 'stopped';

const MAX_SNOOZE_MS = 30 * 86_400_000;

/**
 * Runs handlers for jobs of some queues. Claims never exceed free slots and commit before a handler
 * starts; a lease keeper renews leases on evidence of progress; outcomes are written in batched,
 * fenced statements; a LISTEN connection wakes idle queues and a periodic poll drains the table
 * whatever notifications were lost; a recovery sweep returns expired leases of any worker.
 */
export class Worker extends EventEmitter<WorkerEventMap> {
  /** The lease owner name of this worker. */
  readonly owner: string;
  /** Running totals since start. */
  readonly counters: WorkerCounters = {
    claimed: 0,
    completed: 0,
    retried: 0,
    dead: 0,
    snoozed: 0,
    lost: 0,
    stuck: 0,
    recovered: 0,
  };

  readonly #lh: Leasehold;
  readonly #options: ResolvedWorkerOptions;
  readonly #queues = new Map<string, QueueState>();
  readonly #batcher: OutcomeBatcher;
  readonly #keeper: LeaseKeeper;
  readonly #recovery: RecoveryService | null;
  readonly #retention: RetentionService | null;
  readonly #listener: WakeupListener | null;
  readonly #runs = new Map<ActiveJob, Promise<void>>();
  #state: WorkerState = 'idle';
  #pollTimer: NodeJS.Timeout | null = null;
  #stopping: Promise<void> | null = null;
  #signalHandler: (() => void) | null = null;

  constructor(lh: Leasehold, options: WorkerOptions) {
    super();
    this.#lh = lh;
    this.#options = resolveWorkerOptions(options, lh.backoff);
    this.owner = this.#options.owner;
    for (const config of this.#options.queues) {
      this.#queues.set(config.name, {
        config,
        active: 0,
        awaiting: 0,
        wanted: false,
        pump: null,
        pumpScheduled: false,
        claimFailures: 0,
        buffer: [],
      });
    }
    const reportError = (err: unknown) => this.#reportError(err);
    this.#batcher = new OutcomeBatcher(lh.pool, lh.schema, this.#options.outcomeBatchDelayMs, reportError);
    this.#keeper = new LeaseKeeper(lh.pool, lh.schema, this.#options.queues, {
      aborted: (job, reason) => this.#onAborted(job, reason),
      stuck: (job) => {
        this.counters.stuck++;
        this.emit('stuck', job);
      },
      error: reportError,
    });
    this.#recovery =
      this.#options.recoveryIntervalMs > 0
        ? new RecoveryService({
            intervalMs: this.#options.recoveryIntervalMs,
            recover: () => lh.recoverExpired(),
            onRecovered: (result) => {
              this.counters.recovered += result.retried + result.dead;
              this.emit('recovered', result);
              // Recovered jobs may be claimable soon; the poll picks up those still in backoff.
              this.#wakeAll();
            },
            onError: reportError,
          })
        : null;
    this.#retention =
      this.#options.pruneIntervalMs > 0
        ? new RetentionService({
            intervalMs: this.#options.pruneIntervalMs,
            pool: lh.pool,
            schema: lh.schema,
            prune: (db) =>
              prunePass(db, lh.schema, {
                succeededRetentionMs: lh.succeededRetentionMs,
                batchSize: DEFAULT_PRUNE_BATCH,
                limit: DEFAULT_PRUNE_LIMIT,
              }),
            onPruned: (result) => this.emit('pruned', result),
            onError: reportError,
          })
        : null;
    this.#listener = this.#options.listen
      ? new WakeupListener({
          connection: (lh.pool as pg.Pool & { options: pg.ClientConfig }).options,
          channel: wakeupChannel(lh.schema),
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

  /** The LISTEN connection's server pid while connected (null when not listening). */
  get listenerPid(): number | null {
    return this.#listener?.backendPid ?? null;
  }

  /** Starts claiming. Rejects if the worker was already started. */
  async start(): Promise<void> {
    if (this.#state !== 'idle') {
      throw new LeaseholdError('WORKER_STATE', `worker ${this.owner} was already started`);
    }
    this.#state = 'running';
    this.#listener?.start();
    this.#recovery?.start();
    this.#retention?.start();
    this.#pollTimer = setInterval(() => this.#wakeAll(), this.#options.pollIntervalMs);
    if (this.#options.handleSignals) this.#installSignalHandlers();
    this.#wakeAll();
  }

  /**
   * Stops claiming, lets running handlers finish for up to `shutdownTimeoutMs`, then aborts the
   * rest and hands their leases back (pending again at once, attempt refunded), and waits until
   * every outcome write is answered. Safe to call more than once.
   */
  stop(): Promise<void> {
    if (this.#state === 'idle' || this.#state === 'stopped') {
      this.#state = 'stopped';
      return Promise.resolve();
    }
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
        for (const { row } of q.buffer.splice(0)) handedBack.push(this.#handBack(q, row));
      }
    };
    handBackBuffers();
    await Promise.all([this.#listener?.stop(), this.#recovery?.stop(), this.#retention?.stop()]);
    await Promise.all([...this.#queues.values()].map((q) => q.pump));
    handBackBuffers();

    if (this.#runs.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, this.#options.shutdownTimeoutMs);
      });
      await Promise.race([Promise.all(this.#runs.values()), timeout]);
      clearTimeout(timer);
    }
    const releases: Promise<OutcomeResult>[] = [];
    for (const job of this.#runs.keys()) {
      if (job.reported) continue;
      job.abort('shutdown');
      this.emit('aborted', job, 'shutdown');
      job.reported = true;
      // Hand the lease back: pending now, attempt refunded, since the job did not fail.
      releases.push(this.#batcher.snooze({ ...job.lease, delayMs: 0, handBack: 'shutdown' }));
    }
    await Promise.all([...releases, ...handedBack]);
    await this.#batcher.drained();
    this.#keeper.stop();
    this.#removeSignalHandlers();
    this.#state = 'stopped';
  }

  #wakeAll(): void {
    for (const queue of this.#queues.keys()) this.#wake(queue);
  }

  #wake(queueName: string): void {
    const q = this.#queues.get(queueName);
    if (!q || this.#state !== 'running') return;
    q.wanted = true;
    this.#schedulePump(q);
  }

  // Deferred to the next turn so that slots freed together (one outcome batch answering many
  // jobs) are claimed for together, in one statement.
  #schedulePump(q: QueueState): void {
    if (q.pumpScheduled || q.pump) return;
    q.pumpScheduled = true;
    setImmediate(() => {
      q.pumpScheduled = false;
      if (!q.pump) q.pump = this.#pump(q).finally(() => (q.pump = null));
    });
  }

  async #pump(q: QueueState): Promise<void> {
    const { config } = q;
    while (this.#state === 'running' && q.wanted) {
      const room = this.#claimRoom(q);
      if (room <= 0) return; // a freed slot or an answered write schedules the next claim
      q.wanted = false;
      const limit = Math.min(room, this.#options.claimBatchSize);
      const sentAt = performance.now();
      let rows: ClaimedRow[];
      try {
        rows = await claimJobs(this.#lh.pool, this.#lh.schema, {
          queue: config.name,
          owner: this.owner,
          limit,
          leaseMs: config.leaseMs,
        });
        q.claimFailures = 0;
      } catch (err) {
        this.#reportError(err);
        q.claimFailures++;
        q.wanted = true;
        await sleep(Math.random() * Math.min(5000, 100 * 2 ** q.claimFailures));
        continue;
      }
      this.counters.claimed += rows.length;
      for (const row of rows) q.buffer.push({ row, claimSentAt: sentAt });
      this.#startBuffered(q);
      // A full batch suggests more is waiting; a short one means the queue is drained for now.
      if (rows.length === limit) q.wanted = true;
    }
  }

  /**
   * How many jobs to claim now. Without prefetch, only for free slots, and a slot is free only once
   * its last outcome write was answered. With prefetch, the running and buffered jobs stay within
   * concurrency + prefetch, and writes in flight may add as many again: so the next claim overlaps
   * the previous batch's completion instead of waiting for it. Claims wait until a quarter of the
   * allowance is free, so they stay large.
   */
  #claimRoom(q: QueueState): number {
    const { concurrency, prefetch } = q.config;
    if (prefetch === 0) return concurrency - q.active - q.awaiting;
    const allowance = concurrency + prefetch;
    if (q.awaiting > allowance) return 0;
    const room = allowance - q.active - q.buffer.length;
    return room >= allowance / 4 ? room : 0;
  }

  // Starts buffered jobs while handler slots are free. Without prefetch, a slot is free only once
  // its previous job's outcome write was answered; with it, unanswered writes count against the
  // prefetch allowance instead. A job that waited so long that less than half of its lease is left
  // is handed back rather than started on borrowed time.
  #startBuffered(q: QueueState): void {
    const { config } = q;
    let started = 0;
    if (this.#state !== 'running') return;
    const slotsHeldUntilAnswered = config.prefetch === 0;
    while (
      q.active + (slotsHeldUntilAnswered ? q.awaiting : 0) < config.concurrency &&
      started < q.buffer.length
    ) {
      const next = q.buffer[started++] as Buffered;
      if (performance.now() - next.claimSentAt > config.leaseMs / 2) void this.#handBack(q, next.row);
      else this.#start(q, next.row, next.claimSentAt);
    }
    if (started > 0) q.buffer.splice(0, started);
  }

  // Returns a claimed job that never started: pending again at once, its attempt refunded.
  #handBack(q: QueueState, row: ClaimedRow): Promise<OutcomeResult> {
    return this.#batcher.snooze({
      jobId: row.id,
      token: row.lease_token,
      owner: this.owner,
      queue: q.config.name,
      delayMs: 0,
      handBack: 'unstarted',
    });
  }

  #start(q: QueueState, row: ClaimedRow, claimSentAt: number): void {
    const { config } = q;
    const job = new ActiveJob(
      {
        jobId: row.id,
        queue: config.name,
        payload: row.payload,
        owner: this.owner,
        token: row.lease_token,
        attempt: row.attempt_count,
        maxAttempts: row.max_attempts,
        expiresAt: row.lease_expires_at,
      },
      `${this.#lh.schema}:${row.id}`,
      claimSentAt,
      config.leaseMs,
      this.#keeper.marginFor(config.leaseMs),
      config.maxRuntimeMs,
      { db: this.#lh.pool, schema: this.#lh.schema },
    );
    q.active++;
    this.#keeper.track(job, config);
    const run = this.#execute(job, q).finally(() => {
      this.#keeper.untrack(job);
      this.#runs.delete(job);
      q.awaiting--;
      this.#startBuffered(q);
      if (q.wanted && this.#claimRoom(q) > 0) this.#schedulePump(q);
    });
    this.#runs.set(job, run);
  }

  async #execute(job: ActiveJob, q: QueueState): Promise<void> {
    const { config } = q;
    let outcome: Promise<OutcomeResult> | null;
    try {
      await config.handler(job);
      outcome = this.#report(job, () => this.#batcher.complete(job.lease));
    } catch (err) {
      outcome = this.#report(job, () => this.#recordFailure(job, config, err));
    }
    job.settled = true;
    q.active--;
    q.awaiting++;
    this.#startBuffered(q);
    if (q.wanted && this.#claimRoom(q) > 0) this.#schedulePump(q);
    if (outcome) this.#count(job, await outcome);
  }

  /**
   * Sends an outcome unless one was already sent for this run, or the lease is no longer ours as
   * far as this process can tell: then nothing is sent, and the job is left to the recovery sweep.
   */
  #report(job: ActiveJob, send: () => Promise<OutcomeResult>): Promise<OutcomeResult> | null {
    if (job.reported) return null;
    job.reported = true;
    if (!job.holdsLease) {
      this.#count(job, 'lost');
      return null;
    }
    return send();
  }

  #recordFailure(job: ActiveJob, config: ResolvedQueue, err: unknown): Promise<OutcomeResult> {
    const kind = classifyFailure(err);
    if (kind === 'snooze') {
      const requested = (err as { delayMs?: unknown }).delayMs;
      const delayMs =
        typeof requested === 'number' && Number.isFinite(requested)
          ? Math.min(MAX_SNOOZE_MS, Math.max(0, Math.round(requested)))
          : 0;
      return this.#batcher.snooze({ ...job.lease, delayMs });
    }
    const requestedDelay = kind === 'retryable' ? (err as { delayMs?: unknown }).delayMs : undefined;
    const budget = kind === 'unknown' ? config.unknownErrorAttempts : null;
    const cap = config.maxAttempts;
    return this.#batcher.fail({
      ...job.lease,
      retryable: kind !== 'permanent',
      delayMs:
        typeof requestedDelay === 'number' && Number.isFinite(requestedDelay)
          ? Math.min(MAX_SNOOZE_MS, Math.max(0, requestedDelay))
          : null,
      baseMs: config.backoff.baseMs,
      maxMs: config.backoff.maxMs,
      attemptBudget: budget === null ? cap : cap === null ? budget : Math.min(budget, cap),
      ...describeError(err),
    });
  }

  #onAborted(job: ActiveJob, reason: AbortReason): void {
    this.emit('aborted', job, reason);
    if (reason !== 'max-runtime' || job.reported) return;
    // Past its maximum runtime, the run is recorded as a retryable time-out at once, while the
    // lease is still ours; the handler's slot stays taken until it returns.
    job.reported = true;
    const config = this.#queues.get(job.queue)?.config;
    if (!config) return;
    const timeout = Object.assign(
      new Error(`job exceeded its maximum runtime of ${config.maxRuntimeMs} ms`),
      {
        name: 'TimeoutError',
        code: 'TIMEOUT',
      },
    );
    void this.#batcher
      .fail({
        ...job.lease,
        retryable: true,
        delayMs: null,
        baseMs: config.backoff.baseMs,
        maxMs: config.backoff.maxMs,
        attemptBudget: config.maxAttempts,
        ...describeError(timeout),
      })
      .then((result) => this.#count(job, result));
  }

  #count(job: ActiveJob, result: OutcomeResult): void {
    switch (result) {
      case 'completed':
        this.counters.completed++;
        break;
      case 'retry':
        this.counters.retried++;
        break;
      case 'dead':
        this.counters.dead++;
        break;
      case 'snoozed':
        this.counters.snoozed++;
        break;
      case 'lost':
        this.counters.lost++;
        break;
    }
    this.emit('outcome', job, result);
  }

  #reportError(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  #installSignalHandlers(): void {
    let signalled = false;
    this.#signalHandler = () => {
      // A second signal means "now": leave, and let the leases expire and be recovered.
      if (signalled) process.exit(130);
      signalled = true;
      void this.stop();
    };
    process.on('SIGTERM', this.#signalHandler);
    process.on('SIGINT', this.#signalHandler);
  }

  #removeSignalHandlers(): void {
    if (!this.#signalHandler) return;
    process.off('SIGTERM', this.#signalHandler);
    process.off('SIGINT', this.#signalHandler);
    this.#signalHandler = null;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
