import type { StandardSchemaV1 } from '@standard-schema/spec';
import { assertLeaseMs, type BackoffOptions, MAX_ATTEMPTS_LIMIT, resolveBackoff } from '../shared/config.js';
import { WORKER_DEFAULTS } from '../shared/defaults.js';
import { ValidationError } from '../shared/errors.js';
import { rejectUnknownOptions } from '../shared/unknown-options.js';
import { assertQueueName, optionalInt } from '../shared/validation.js';
import {
  type BatchHandler,
  type BatchJobContext,
  type BatchOptions,
  type ResolvedBatch,
  resolveBatch,
} from './batch/batch-options.js';
import type { JobContext } from './run/job-context.js';

/**
 * The options of one queue of a worker (and so of a task): its handler, one job or a batch per
 * call, and its settings; validated by `resolveQueue`.
 */

/** A queue's handler: resolve to complete the job, throw to fail it. */
export type JobHandler = (job: JobContext) => Promise<unknown>;

/**
 * A queue's handler given alone, in place of its options. The `batch` member is never set: it only
 * lets TypeScript tell single-job options from batch options in `queues`, so `(job) => ...` stays typed.
 */
export type QueueHandler = JobHandler & { batch?: undefined };

/** How a running job earns lease extensions. */
export type RenewPolicy = 'progress' | 'alive';

/** A queue's options apart from its handler (and `batch`). */
export interface WorkerQueueSettings {
  /**
   * Jobs of this queue run at once in this worker (default 10). With `batch`, it counts jobs too:
   * default `batch.size` (one batch at a time), and at least that.
   */
  concurrency?: number;
  /**
   * Jobs to claim ahead into a local buffer beyond the free slots, fixed (0 to 5000). Unset
   * (default): adaptive, from 0 up to what the queue finishes in a quarter of its lease at the
   * observed rate (see `src/runtime/claim/claim-sizer.ts`). Buffered jobs hold leases while they wait; a
   * job that waited longer than half its lease is handed back unstarted.
   */
  prefetch?: number;
  /** Lease length in ms (default 30 s); renewed while the job earns it (see `renew`). */
  leaseMs?: number;
  /**
   * Longest a single run may take, whatever its renewals (default 15 min, pg-boss's default
   * expiry): the bound on how long a handler that hangs without blocking keeps its job.
   */
  maxRuntimeMs?: number;
  /**
   * `alive` (default): renew while the handler's promise is pending, up to `maxRuntimeMs`;
   * `progress` (stricter): renew only after `job.progress()`, so a handler stuck in an endless
   * await loses its lease within one lease length.
   */
  renew?: RenewPolicy;
  /** Caps the attempts of this queue's jobs below what each job allows. */
  maxAttempts?: number;
  /** Attempts allowed for unclassified errors (default 3): less than for RetryableError. */
  unknownErrorAttempts?: number;
  /** Backoff for this queue's retries; defaults to the client's. */
  backoff?: BackoffOptions;
  /**
   * Share of the worker's `slots` while this queue has pending work, relative to the other queues'
   * weights (1 to 1000, default 1). Needs `slots`; `concurrency` still caps the queue.
   */
  weight?: number;
}

/** A queue whose handler runs one job per call. */
export interface SingleQueueOptions extends WorkerQueueSettings {
  /** Runs one job. */
  handler: JobHandler;
  /** Absent: one job per call. */
  batch?: undefined;
}

/** A queue whose handler runs many jobs in one call (see `BatchOptions`). */
export interface BatchQueueOptions extends WorkerQueueSettings {
  /**
   * Runs a batch of jobs: resolve to complete every job not settled by `fail` or `retry`, throw to
   * fail them. A method, so that `(jobs: BatchJobContext<MyPayload>[]) => ...` is accepted.
   */
  handler(jobs: BatchJobContext[]): ReturnType<BatchHandler>;
  /** How many jobs one call gets, and how long a partial batch waits to fill. */
  batch: BatchOptions;
}

/** Per-queue worker options: a handler of one job, or one of a batch with `batch`. */
export type QueueOptions = SingleQueueOptions | BatchQueueOptions;

/** What a worker needs of a task made by `defineTask`: its name (the queue), options and schema. */
export interface WorkerTask {
  /** The task's name, which is the name of its queue. */
  readonly name: string;
  /** Its handler and queue options, as a queue given by name would have them. */
  readonly queue: QueueOptions;
  /** Its payload validator; undefined when the task has none. */
  readonly schema: StandardSchemaV1 | undefined;
}

/** Validated options of one queue. */
export interface ResolvedQueue {
  name: string;
  handler: JobHandler | BatchHandler;
  /** Batch settings; null for a queue whose handler runs one job per call. */
  batch: ResolvedBatch | null;
  concurrency: number;
  /** Fixed read-ahead; null when adaptive (the default). */
  prefetch: number | null;
  leaseMs: number;
  maxRuntimeMs: number;
  renew: RenewPolicy;
  maxAttempts: number | null;
  unknownErrorAttempts: number;
  backoff: Required<BackoffOptions>;
  weight: number;
  /** The task's payload validator, run on each claimed payload; null for a queue without one. */
  schema: StandardSchemaV1 | null;
}

/** Option names a queue (and so a task) takes. */
export const KNOWN_QUEUE_KEYS = [
  'handler',
  'concurrency',
  'prefetch',
  'leaseMs',
  'maxRuntimeMs',
  'renew',
  'maxAttempts',
  'unknownErrorAttempts',
  'backoff',
  'weight',
  'batch',
];

/** Validates one queue's options (`value`: the options, or just its handler), filling in defaults. */
export function resolveQueue(
  name: string,
  value: QueueOptions | JobHandler,
  clientBackoff: Required<BackoffOptions>,
  schema: StandardSchemaV1 | null = null,
): ResolvedQueue {
  assertQueueName(name, `queues.${name}`);
  const queue: QueueOptions = typeof value === 'function' ? { handler: value } : value;
  const field = `queues.${name}`;
  if (typeof queue !== 'object' || queue === null || typeof queue.handler !== 'function') {
    throw new ValidationError(`${field}.handler`, 'must be an async function (job) => ...');
  }
  rejectUnknownOptions(queue, KNOWN_QUEUE_KEYS, field);
  const batch = resolveBatch(queue.batch, `${field}.batch`);
  const concurrency = optionalInt(
    queue.concurrency,
    `${field}.concurrency`,
    batch?.size ?? 1,
    1000,
    batch?.size ?? WORKER_DEFAULTS.concurrency,
  );
  const leaseMs =
    queue.leaseMs === undefined ? WORKER_DEFAULTS.leaseMs : assertLeaseMs(queue.leaseMs, `${field}.leaseMs`);
  if (leaseMs < 100)
    throw new ValidationError(`${field}.leaseMs`, 'must be at least 100 ms for a worker to renew it');
  const renew = queue.renew ?? WORKER_DEFAULTS.renew;
  if (renew !== 'progress' && renew !== 'alive') {
    throw new ValidationError(`${field}.renew`, "must be 'progress' or 'alive'");
  }
  return {
    name,
    handler: queue.handler,
    batch,
    concurrency,
    prefetch:
      queue.prefetch === undefined
        ? WORKER_DEFAULTS.prefetch
        : optionalInt(queue.prefetch, `${field}.prefetch`, 0, 5000, 0),
    leaseMs,
    maxRuntimeMs: optionalInt(
      queue.maxRuntimeMs,
      `${field}.maxRuntimeMs`,
      1,
      7 * 86_400_000,
      WORKER_DEFAULTS.maxRuntimeMs,
    ),
    renew,
    maxAttempts:
      queue.maxAttempts === undefined
        ? null
        : optionalInt(queue.maxAttempts, `${field}.maxAttempts`, 1, MAX_ATTEMPTS_LIMIT, 1),
    unknownErrorAttempts: optionalInt(
      queue.unknownErrorAttempts,
      `${field}.unknownErrorAttempts`,
      1,
      MAX_ATTEMPTS_LIMIT,
      WORKER_DEFAULTS.unknownErrorAttempts,
    ),
    backoff: resolveBackoff(queue.backoff, `${field}.backoff`, clientBackoff),
    weight: optionalInt(queue.weight, `${field}.weight`, 1, 1000, WORKER_DEFAULTS.weight),
    schema,
  };
}
