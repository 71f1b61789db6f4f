import pg from 'pg';
import type {
  ClaimOptions,
  EnqueueItem,
  EnqueueOptions,
  EnqueueResult,
  FailOptions,
  LeaseholdOptions,
  PruneOptions,
} from './client-options.js';
import {
  assertLeaseMs,
  type BackoffOptions,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_ATTEMPTS,
  MAX_ATTEMPTS_LIMIT,
  resolveBackoff,
} from './config.js';
import { ValidationError } from './errors.js';
import type { JobWithHistory } from './job-history.js';
import type { Lease } from './lease.js';
import {
  DEFAULT_PRUNE_BATCH,
  DEFAULT_PRUNE_LIMIT,
  DEFAULT_SUCCEEDED_RETENTION_MS,
  type PruneResult,
  prunePass,
} from './maintenance/retention.js';
import { type MigrateResult, migrate } from './migrations/migrator.js';
import { traceEnqueue } from './observability/tracing.js';
import { type CancelOptions, type CancelResult, cancel } from './operations/cancel.js';
import { ClaimRouter } from './operations/claim-router.js';
import { type DeadJobPage, type ListDeadOptions, listDead } from './operations/dead.js';
import { checkHealth, type HealthReport, type HealthRules } from './operations/health.js';
import { readJobWithHistory } from './operations/history.js';
import {
  type BlockedKey,
  type BlockedKeysOptions,
  blockedKeys,
  type SkipOptions,
  skip,
} from './operations/ordering.js';
import {
  configureQueue,
  type QueueConfig,
  type QueueSettings,
  type QueueSummary,
  queueSummaries,
} from './operations/queues.js';
import { type ReplayFilter, type ReplayOptions, type ReplayResult, replay } from './operations/replay.js';
import { type LeaseholdStats, readStats, type StatsOptions } from './operations/stats.js';
import { poolerDefaults } from './pooler-env.js';
import { describeError } from './runtime/error-details.js';
import { Worker, type WorkerOptions } from './runtime/worker.js';
import { completeJobs } from './storage/complete.js';
import { type Queryable, runUnnamedOn, runUnnamedOnPool } from './storage/db.js';
import { insertJob, insertJobs, type NewJob, notifyQueue } from './storage/enqueue.js';
import { insertKeyedJob } from './storage/enqueue-keyed.js';
import { insertOrderedJobs } from './storage/enqueue-ordered.js';
import { type FailOutcome, failJobs } from './storage/fail.js';
import { extendLeases } from './storage/heartbeat.js';
import { type Job, type RefusalCount, readJob, readRefusals } from './storage/read.js';
import { recoverExpiredLeases } from './storage/recover.js';
import {
  assertClaimId,
  assertInt,
  assertJobId,
  assertOwner,
  assertQueueName,
  assertSchemaName,
  DEFAULT_MAX_PAYLOAD_BYTES,
  MAX_BATCH,
  MAX_ENQUEUE_MANY,
  MAX_ENQUEUE_MANY_BYTES,
  MAX_PAYLOAD_BYTES_LIMIT,
  optionalBoolean,
  optionalInt,
  optionalText,
  optionsObject,
  scheduleFromOptions,
  serialisePayload,
} from './validation.js';
import { WakeupCoalescer } from './wakeup-coalescer.js';

export type {
  ClaimOptions,
  EnqueueItem,
  EnqueueOptions,
  EnqueueResult,
  FailOptions,
  LeaseholdOptions,
  PruneOptions,
} from './client-options.js';

const PRIORITY_LIMIT = 1_000_000;

/** Window within which autocommit enqueues of one queue share a single wake-up notification. */
const WAKEUP_WINDOW_MS = 3;

/**
 * The Leasehold client: enqueue work, claim it under an expiring lease, and report outcomes that
 * are accepted only while that lease is current.
 */
export class Leasehold {
  /** The validated schema name. */
  readonly schema: string;
  /** The pool every statement runs on (unless a call passes its own client). */
  readonly pool: pg.Pool;
  /** Resolved retry backoff. */
  readonly backoff: Required<BackoffOptions>;
  /** Largest payload accepted, in JSON bytes. */
  readonly maxPayloadBytes: number;
  /** Default retention of succeeded jobs, in ms. */
  readonly succeededRetentionMs: number;
  /** False when statements run unnamed (behind a transaction-mode pooler). */
  readonly preparedStatements: boolean;
  /** Whether this client's workers listen for wake-ups by default. */
  readonly listen: boolean;
  /** Settings of the workers' LISTEN connection (a direct one, or the pool's). */
  readonly listenConnection: pg.ClientConfig;
  readonly #ownsPool: boolean;
  // Autocommit enqueues share one wake-up per queue per window (see wakeup-coalescer.ts).
  readonly #wakeups = new WakeupCoalescer(WAKEUP_WINDOW_MS, (queue) =>
    notifyQueue(this.pool, this.schema, queue),
  );
  readonly #claims: ClaimRouter;

  constructor(options: LeaseholdOptions = {}) {
    const schema = options.schema ?? 'leasehold';
    assertSchemaName(schema);
    this.schema = schema;
    this.backoff = resolveBackoff(options.backoff, 'backoff');
    this.maxPayloadBytes = optionalInt(
      options.maxPayloadBytes,
      'maxPayloadBytes',
      2,
      MAX_PAYLOAD_BYTES_LIMIT,
      DEFAULT_MAX_PAYLOAD_BYTES,
    );
    this.succeededRetentionMs = optionalInt(
      options.succeededRetentionMs,
      'succeededRetentionMs',
      0,
      10 * 365 * 86_400_000,
      DEFAULT_SUCCEEDED_RETENTION_MS,
    );
    if (
      options.listenConnectionString !== undefined &&
      (typeof options.listenConnectionString !== 'string' || options.listenConnectionString === '')
    ) {
      throw new ValidationError('listenConnectionString', 'must be a non-empty connection string');
    }
    const defaults = poolerDefaults(process.env, options.listenConnectionString);
    this.preparedStatements = optionalBoolean(
      options.preparedStatements,
      'preparedStatements',
      defaults.preparedStatements,
    );
    this.listen = optionalBoolean(options.listen, 'listen', defaults.listen);
    if (options.pool) {
      this.pool = options.pool;
      this.#ownsPool = false;
    } else {
      const connectionString = options.connectionString ?? process.env.DATABASE_URL;
      if (!connectionString) {
        throw new ValidationError('connectionString', 'give connectionString or pool, or set DATABASE_URL');
      }
      this.pool = new pg.Pool({
        connectionString,
        max: optionalInt(options.poolSize, 'poolSize', 1, 1000, 10),
        application_name: 'leasehold',
      });
      // An idle client losing its connection (a server restart) must not crash the process;
      // the next query on a fresh connection reports the error where it can be handled.
      this.pool.on('error', () => {});
      this.#ownsPool = true;
    }
    if (!this.preparedStatements) runUnnamedOnPool(this.pool);
    if (defaults.listenConnectionString !== undefined) {
      this.listenConnection = { connectionString: defaults.listenConnectionString };
    } else {
      this.listenConnection = (this.pool as pg.Pool & { options: pg.ClientConfig }).options;
    }
    // lh.claim keeps strict preference order: no claim floor (workers use one, see claim-floor.ts).
    this.#claims = new ClaimRouter(this.pool, this.schema, null);
  }

  /** Creates or upgrades the schema; safe to call from many processes at once. */
  migrate(): Promise<MigrateResult> {
    return migrate(this.pool, this.schema);
  }

  /** Ends the pool if Leasehold created it. */
  async close(): Promise<void> {
    await this.#wakeups.flush();
    if (this.#ownsPool) await this.pool.end();
  }

  /**
   * Adds a job to `queue`. With `client`, the job joins that transaction. With `idempotencyKey`, a
   * job already holding that key in the queue is returned instead (`created: false`).
   */
  async enqueue(queue: string, payload: unknown, options?: EnqueueOptions): Promise<EnqueueResult> {
    assertQueueName(queue);
    const opts = optionsObject(options);
    return traceEnqueue(
      { db: this.#on(opts.client), schema: this.schema, queue, count: 1 },
      () => this.#enqueue(queue, payload, opts),
      (result) => (result.created ? [result.id] : []),
    );
  }

  async #enqueue(queue: string, payload: unknown, options: EnqueueOptions): Promise<EnqueueResult> {
    const job = this.#newJob({ ...options, payload }, 'options');
    const db = this.#on(options.client);
    if (options.idempotencyKey !== undefined) {
      const key = optionalText(options.idempotencyKey, 'options.idempotencyKey', 200) as string;
      if (job.orderingKey !== null) {
        throw new ValidationError('options.orderingKey', 'cannot be combined with idempotencyKey yet');
      }
      return insertKeyedJob(db, this.schema, queue, job, key);
    }
    if (job.orderingKey !== null) {
      const [id] = await insertOrderedJobs(db, this.schema, queue, [job]);
      return { id: id as string, created: true };
    }
    if (options.client) {
      // Inside the caller's transaction: notify in it, delivered on its commit.
      return { id: await insertJob(db, this.schema, queue, job), created: true };
    }
    const notify = this.#wakeups.notifyInline(queue);
    const id = await insertJob(db, this.schema, queue, job, { notify });
    if (!notify) this.#wakeups.quietInsertCommitted(queue);
    return { id, created: true };
  }

  /** Adds many jobs to `queue` in one statement, all or nothing; ids come back in input order. */
  async enqueueMany(
    queue: string,
    items: readonly EnqueueItem[],
    options?: { client?: Queryable },
  ): Promise<{ ids: string[] }> {
    assertQueueName(queue);
    const opts = optionsObject(options);
    return traceEnqueue(
      {
        db: this.#on(opts.client),
        schema: this.schema,
        queue,
        count: Array.isArray(items) ? items.length : 0,
      },
      () => this.#enqueueMany(queue, items, opts),
      (result) => result.ids,
    );
  }

  async #enqueueMany(
    queue: string,
    items: readonly EnqueueItem[],
    options: { client?: Queryable },
  ): Promise<{ ids: string[] }> {
    if (!Array.isArray(items) || items.length === 0 || items.length > MAX_ENQUEUE_MANY) {
      throw new ValidationError('items', `must be an array of 1 to ${MAX_ENQUEUE_MANY} jobs`);
    }
    const jobs = items.map((item, index) => this.#newJob(item, `items[${index}]`));
    let bytes = 0;
    for (const job of jobs) bytes += Buffer.byteLength(job.payloadJson, 'utf8');
    if (bytes > MAX_ENQUEUE_MANY_BYTES) {
      throw new ValidationError(
        'items',
        `hold ${bytes} bytes of payload JSON, over the limit of ${MAX_ENQUEUE_MANY_BYTES} for one call; split the batch`,
      );
    }
    const db = this.#on(options.client);
    if (jobs.some((job) => job.orderingKey !== null)) {
      return { ids: await insertOrderedJobs(db, this.schema, queue, jobs) };
    }
    if (options.client) return { ids: await insertJobs(db, this.schema, queue, jobs) };
    // Autocommit: wake-ups coalesced like single enqueues (see src/wakeup-coalescer.ts).
    const notify = this.#wakeups.notifyInline(queue);
    const ids = await insertJobs(db, this.schema, queue, jobs, { notify });
    if (!notify) this.#wakeups.quietInsertCommitted(queue);
    return { ids };
  }

  /** Claims up to `limit` jobs of a queue in one statement and commits at once. */
  async claim(claimOptions: ClaimOptions): Promise<Lease[]> {
    const options = optionsObject(claimOptions);
    assertQueueName(options.queue);
    assertOwner(options.owner);
    const limit = optionalInt(options.limit, 'limit', 1, MAX_BATCH, 1);
    const leaseMs =
      options.leaseMs === undefined ? DEFAULT_LEASE_MS : assertLeaseMs(options.leaseMs, 'leaseMs');
    const rows = await this.#claims.claim({
      queue: options.queue,
      owner: options.owner,
      limit,
      leaseMs,
    });
    return rows.map((row) => ({
      jobId: row.id,
      queue: options.queue,
      payload: row.payload,
      owner: options.owner,
      token: row.lease_token,
      claimId: row.lease_claim_id,
      attempt: row.attempt_count,
      maxAttempts: row.max_attempts,
      expiresAt: new Date(row.lease_expires_ms),
    }));
  }

  /** Extends a lease from now; false when it is lost (expired, recovered or reclaimed). */
  async heartbeat(lease: Lease, heartbeatOptions?: { leaseMs?: number }): Promise<boolean> {
    assertLease(lease);
    const options = optionsObject(heartbeatOptions);
    const leaseMs =
      options.leaseMs === undefined ? DEFAULT_LEASE_MS : assertLeaseMs(options.leaseMs, 'leaseMs');
    const extended = await extendLeases(this.pool, this.schema, [{ ...lease, leaseMs }]);
    const expiresAt = extended.get(lease.jobId);
    if (expiresAt) lease.expiresAt = expiresAt;
    return expiresAt !== undefined;
  }

  /** Marks the job succeeded; false when the lease was lost and nothing changed. */
  async complete(lease: Lease, options?: { client?: Queryable }): Promise<boolean> {
    assertLease(lease);
    const accepted = await completeJobs(this.#on(optionsObject(options).client), this.schema, [lease]);
    return accepted.has(lease.jobId);
  }

  /**
   * Completes many leases in one fenced statement; returns the ids whose completion was accepted
   * (the others were fenced out and changed nothing).
   */
  async completeMany(leases: readonly Lease[], options?: { client?: Queryable }): Promise<Set<string>> {
    const db = this.#on(optionsObject(options).client);
    if (!Array.isArray(leases) || leases.length > MAX_BATCH) {
      throw new ValidationError('leases', `must be an array of at most ${MAX_BATCH} leases`);
    }
    for (const lease of leases) assertLease(lease);
    return completeJobs(db, this.schema, leases);
  }

  /**
   * Records a failed attempt: `retry` (pending again after backoff), `dead` (attempts spent or
   * not retryable; kept, never deleted) or `lost` (the lease was lost; nothing changed).
   */
  async fail(lease: Lease, error: unknown, failOptions?: FailOptions): Promise<FailOutcome> {
    assertLease(lease);
    const options = optionsObject(failOptions);
    const details = describeError(error, options.code);
    const outcomes = await failJobs(this.pool, this.schema, [
      {
        ...lease,
        retryable: optionalBoolean(options.retryable, 'retryable', true),
        delayMs:
          options.delayMs === undefined ? null : assertInt(options.delayMs, 'delayMs', 0, 30 * 86_400_000),
        baseMs: this.backoff.baseMs,
        maxMs: this.backoff.maxMs,
        attemptBudget:
          options.attemptBudget === undefined
            ? null
            : assertInt(options.attemptBudget, 'attemptBudget', 1, MAX_ATTEMPTS_LIMIT),
        ...details,
      },
    ]);
    return outcomes.get(lease.jobId) ?? 'lost';
  }

  /**
   * Returns expired leases to `pending` (after backoff: the client's, or `backoff`) or `dead`
   * (attempts spent), in batches of `batchSize`, each its own short transaction, until none is left
   * or `limit` jobs were moved.
   */
  async recoverExpired(recoverOptions?: {
    limit?: number;
    batchSize?: number;
    backoff?: BackoffOptions;
  }): Promise<{ retried: number; dead: number }> {
    const options = optionsObject(recoverOptions);
    const limit = optionalInt(options.limit, 'limit', 1, Number.MAX_SAFE_INTEGER, 100_000);
    const batchSize = optionalInt(options.batchSize, 'batchSize', 1, MAX_BATCH, MAX_BATCH);
    const backoff =
      options.backoff === undefined ? this.backoff : resolveBackoff(options.backoff, 'backoff', this.backoff);
    const total = { retried: 0, dead: 0 };
    while (total.retried + total.dead < limit) {
      const batch = Math.min(batchSize, limit - total.retried - total.dead);
      const moved = await recoverExpiredLeases(this.pool, this.schema, { limit: batch, ...backoff });
      total.retried += moved.retried;
      total.dead += moved.dead;
      if (moved.retried + moved.dead < batch) break;
    }
    return total;
  }

  /** Reads one job; null when none has that id. With `history: true`, adds its history in order. */
  getJob(id: string | bigint | number): Promise<Job | null>;
  getJob(id: string | bigint | number, options: { history: true }): Promise<JobWithHistory | null>;
  getJob(id: string | bigint | number, options?: { history?: boolean }): Promise<Job | JobWithHistory | null>;
  async getJob(
    id: string | bigint | number,
    options?: { history?: boolean },
  ): Promise<Job | JobWithHistory | null> {
    const jobId = assertJobId(id);
    if (optionalBoolean(optionsObject(options).history, 'history', false))
      return readJobWithHistory(this.pool, this.schema, jobId);
    return readJob(this.pool, this.schema, jobId);
  }

  /** Pages through dead jobs, newest death first, with their error summary (never payloads). */
  listDead(options: ListDeadOptions = {}): Promise<DeadJobPage> {
    return listDead(this.pool, this.schema, options);
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
    return replay(this.pool, this.schema, target, options);
  }

  /** Cancels a pending or running job (a running one's worker is fenced out); `JobStateError` when finished. */
  cancel(id: string | bigint | number, options: CancelOptions): Promise<CancelResult> {
    return cancel(this.pool, this.schema, id, options);
  }

  /** Creates or changes a queue's settings: owner, retention, paused, per-key limit, aging. */
  configureQueue(queue: string, config: QueueConfig): Promise<QueueSettings> {
    this.#claims.forget(queue);
    return configureQueue(this.pool, this.schema, queue, config);
  }

  /**
   * Gives up on a dead job so that its ordering key moves on: dead -> cancelled, recorded as a
   * `skipped` event (who, why); the key's next job becomes claimable. `JobStateError` unless dead.
   */
  skip(id: string | bigint | number, options: SkipOptions): Promise<void> {
    return skip(this.pool, this.schema, id, options);
  }

  /** Ordering keys blocked by a dead head, longest blocked first, with how many jobs wait behind. */
  blockedKeys(options: BlockedKeysOptions = {}): Promise<BlockedKey[]> {
    return blockedKeys(this.pool, this.schema, options);
  }

  /** Stops claims from `queue`; running jobs finish. */
  pauseQueue(queue: string): Promise<QueueSettings> {
    return configureQueue(this.pool, this.schema, queue, { paused: true });
  }

  /** Lets `queue` be claimed again. */
  resumeQueue(queue: string): Promise<QueueSettings> {
    return configureQueue(this.pool, this.schema, queue, { paused: false });
  }

  /** Every queue that has jobs or settings: counts, oldest claimable age, owner, paused. */
  async listQueues(options?: { limit?: number }): Promise<QueueSummary[]> {
    return queueSummaries(this.pool, this.schema, optionsObject(options));
  }

  /**
   * One retention pass now: removes succeeded jobs past their retention, and dead or cancelled jobs
   * past their queue's dead retention (each leaving a tombstone), in bounded batches.
   */
  async prune(pruneOptions?: PruneOptions): Promise<PruneResult> {
    const options = optionsObject(pruneOptions);
    return prunePass((batch) => batch(this.pool), this.schema, {
      succeededRetentionMs: this.succeededRetentionMs,
      batchSize: optionalInt(options.batchSize, 'batchSize', 1, MAX_BATCH, DEFAULT_PRUNE_BATCH),
      limit: optionalInt(options.limit, 'limit', 1, Number.MAX_SAFE_INTEGER, DEFAULT_PRUNE_LIMIT),
    });
  }

  /** Lost-fence attempts counted so far, per queue and operation. */
  leaseRefusals(): Promise<RefusalCount[]> {
    return readRefusals(this.pool, this.schema);
  }

  /** Database-derived gauges per queue in one bounded, index-served snapshot: safe to poll every few seconds. */
  stats(options: StatsOptions = {}): Promise<LeaseholdStats> {
    return readStats(this.pool, this.schema, options);
  }

  /** Checks health rules (old work, dead jobs, old transactions, table bloat); `ok` false lists each failure. */
  checkHealth(rules: HealthRules = {}): Promise<HealthReport> {
    return checkHealth(this.pool, this.schema, rules);
  }

  /** Creates a worker that runs handlers for the given queues. Call `start()` on it. */
  worker(options: WorkerOptions): Worker {
    return new Worker(this, options);
  }

  // The connection a call runs on: the caller's client (inside their transaction), else the pool.
  // A caller's client is set to run statements unnamed when this client does.
  #on(client: Queryable | undefined): Queryable {
    if (client === undefined) return this.pool;
    if (!this.preparedStatements) runUnnamedOn(client);
    return client;
  }

  #newJob(
    item: {
      payload?: unknown;
      priority?: number;
      runAt?: Date;
      delayMs?: number;
      maxAttempts?: number;
      orderingKey?: string;
      concurrencyKey?: string;
    },
    field: string,
  ): NewJob {
    if (typeof item !== 'object' || item === null) throw new ValidationError(field, 'must be an object');
    const schedule = scheduleFromOptions(item, field);
    return {
      payloadJson: serialisePayload(
        item.payload,
        this.maxPayloadBytes,
        `${field === 'options' ? '' : `${field}.`}payload`,
      ),
      priority: optionalInt(item.priority, `${field}.priority`, -PRIORITY_LIMIT, PRIORITY_LIMIT, 0),
      runAt: schedule.runAt,
      delayMs: schedule.delayMs,
      maxAttempts: optionalInt(
        item.maxAttempts,
        `${field}.maxAttempts`,
        1,
        MAX_ATTEMPTS_LIMIT,
        DEFAULT_MAX_ATTEMPTS,
      ),
      orderingKey: optionalText(item.orderingKey, `${field}.orderingKey`, 200),
      concurrencyKey: optionalText(item.concurrencyKey, `${field}.concurrencyKey`, 200),
    };
  }
}

function assertLease(lease: Lease): void {
  if (typeof lease !== 'object' || lease === null)
    throw new ValidationError('lease', 'must be a Lease from claim()');
  assertJobId(lease.jobId, 'lease.jobId');
  assertJobId(lease.token, 'lease.token');
  assertClaimId(lease.claimId);
  assertOwner(lease.owner);
  assertQueueName(lease.queue, 'lease.queue');
}
