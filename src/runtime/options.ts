import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { type BackoffOptions, DEFAULT_BACKOFF, resolveBackoff } from '../shared/config.js';
import { WORKER_DEFAULTS } from '../shared/defaults.js';
import { ValidationError } from '../shared/errors.js';
import { rejectUnknownOptions } from '../shared/unknown-options.js';
import { assertOwner, MAX_BATCH, optionalBoolean, optionalInt } from '../shared/validation.js';
import {
  type JobHandler,
  KNOWN_QUEUE_KEYS,
  type QueueHandler,
  type QueueOptions,
  type ResolvedQueue,
  resolveQueue,
  type WorkerTask,
} from './queue-options.js';
import { type OutputLimits, resolveOutputLimits } from './run/job-output.js';
import type { Logger } from './worker-logger.js';

export type {
  BatchQueueOptions,
  JobHandler,
  QueueHandler,
  QueueOptions,
  RenewPolicy,
  ResolvedQueue,
  SingleQueueOptions,
  WorkerQueueSettings,
  WorkerTask,
} from './queue-options.js';
export { KNOWN_QUEUE_KEYS } from './queue-options.js';

/** Options of `lh.worker()`. */
export interface WorkerOptions {
  /** Lease owner name; default hostname:pid:random, unique per worker. */
  owner?: string;
  /** Queue name to its handler and options (with `tasks`, or alone). */
  queues?: Record<string, QueueOptions | QueueHandler>;
  /** Tasks made by `defineTask`, each run on the queue of its name (with `queues`, or alone). */
  tasks?: readonly WorkerTask[];
  /** Claim from the table at least this often even without notifications (default 1000 ms). */
  pollIntervalMs?: number;
  /**
   * Wake on LISTEN/NOTIFY (default: the client's `listen`, true unless set). False: poll only, for
   * a transaction-mode pooler when no direct `listenConnectionString` is given.
   */
  listen?: boolean;
  /** How long `stop()` lets running handlers finish before aborting them (default 10 s). */
  shutdownTimeoutMs?: number;
  /**
   * Longest wait of the expired-lease recovery sweep (default 1000 ms, jittered); 0 disables it. A
   * pass comes sooner when a running lease lapses sooner (it reads when the next one does).
   */
  recoveryIntervalMs?: number;
  /**
   * Backoff of the jobs this worker's sweep returns to `pending` (default: a first retry within
   * 100 ms, or the client's `backoff.baseMs` if smaller, doubling per attempt up to the client's
   * `maxMs`). A lapsed lease is most often a crashed or stalled worker, not the job's failure, so
   * the wait is short; it still spreads a crashed worker's jobs and grows for a job that keeps
   * losing its lease.
   */
  recoveryBackoff?: BackoffOptions;
  /**
   * Mean interval of the retention pass (default 60 s, jittered); 0 disables it. Only one process
   * prunes a schema at a time (an advisory lock); retention settings come from the client and queues.
   * Under the leasehold_worker role, which may not prune, the first pass reports a PermissionError
   * and retention stays off in that worker.
   */
  pruneIntervalMs?: number;
  /**
   * Mean interval of the fairness pass (default 1000 ms, jittered): aging of queues with
   * `agingIntervalMs`, and repair of ordering keys. 0 disables it.
   */
  agingPassIntervalMs?: number;
  /**
   * Mean interval of the scheduler pass that fires due cron schedules (`lh.schedule`; default
   * 1000 ms, jittered); 0 disables it. Every worker may fire: each tick still enqueues one job.
   */
  scheduleIntervalMs?: number;
  /**
   * Mean interval of the lane rotation pass (default 3000 ms, jittered), which keeps the hot lanes
   * of the jobs table emptied by TRUNCATE instead of VACUUM (docs/storage.md). 0 disables it; some
   * worker of the schema should run it.
   */
  laneRotationIntervalMs?: number;
  /** Largest claim batch (default 500, at most 1000); a claim never exceeds free slots plus prefetch. */
  claimBatchSize?: number;
  /** Wait this long to gather outcome writes into one statement (default 0: next tick). */
  outcomeBatchDelayMs?: number;
  /** Stop gracefully on SIGTERM and SIGINT (default false; the CLI turns it on). */
  handleSignals?: boolean;
  /**
   * Handler slots shared by all queues of this worker, handed out by queue `weight` among queues
   * with pending work (see docs/ordering.md). Unset (default): each queue has its own `concurrency`.
   */
  slots?: number;
  /** A pino-compatible logger for the worker's events (job ids, queues, error codes; never payloads). */
  logger?: Logger;
  /** Largest handler return value kept as a job's result, in JSON bytes (default 64 KiB); larger: dead, `RESULT_TOO_LARGE`. */
  maxResultBytes?: number;
  /** Largest `job.progress(detail)` detail, in JSON bytes (default 8 KiB); larger: a `ValidationError`. */
  maxProgressBytes?: number;
}

export { WORKER_DEFAULTS } from '../shared/defaults.js';

/** Validated worker options. */
export interface ResolvedWorkerOptions extends OutputLimits {
  owner: string;
  queues: ResolvedQueue[];
  pollIntervalMs: number;
  listen: boolean;
  shutdownTimeoutMs: number;
  recoveryIntervalMs: number;
  recoveryBackoff: Required<BackoffOptions>;
  pruneIntervalMs: number;
  agingPassIntervalMs: number;
  scheduleIntervalMs: number;
  laneRotationIntervalMs: number;
  claimBatchSize: number;
  outcomeBatchDelayMs: number;
  handleSignals: boolean;
  /** Shared handler slots; null when each queue only has its own concurrency. */
  slots: number | null;
}

/** Option names `lh.worker()` takes (docs/api.md lists each: test/interfaces/docs-options.test.ts). */
export const KNOWN_WORKER_KEYS = [
  'owner',
  'queues',
  'tasks',
  'pollIntervalMs',
  'listen',
  'shutdownTimeoutMs',
  'recoveryIntervalMs',
  'recoveryBackoff',
  'pruneIntervalMs',
  'agingPassIntervalMs',
  'scheduleIntervalMs',
  'laneRotationIntervalMs',
  'claimBatchSize',
  'outcomeBatchDelayMs',
  'handleSignals',
  'slots',
  'logger',
  'maxResultBytes',
  'maxProgressBytes',
];
/** A default owner name, unique per call: hostname:pid:random. */
export function defaultOwner(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** The worker options that are a pass interval or a timeout in ms. */
type IntervalOption =
  | 'shutdownTimeoutMs'
  | 'recoveryIntervalMs'
  | 'pruneIntervalMs'
  | 'agingPassIntervalMs'
  | 'scheduleIntervalMs'
  | 'laneRotationIntervalMs';

/** Validates worker options, filling in defaults; throws `ValidationError` with a suggestion. */
export function resolveWorkerOptions(
  options: WorkerOptions,
  clientBackoff: Required<BackoffOptions> = DEFAULT_BACKOFF,
  clientListen = true,
): ResolvedWorkerOptions {
  if (typeof options !== 'object' || options === null)
    throw new ValidationError('options', 'must be an object');
  rejectUnknownOptions(options, KNOWN_WORKER_KEYS, 'options', {
    known: KNOWN_QUEUE_KEYS,
    path: 'queues.<queue>',
  });
  const owner = options.owner ?? defaultOwner();
  assertOwner(owner);
  const entries = queueEntries(options);
  const queues = entries.map(([name, value, schema]) => resolveQueue(name, value, clientBackoff, schema));
  const slots = options.slots === undefined ? null : optionalInt(options.slots, 'slots', 1, 10_000, 1);
  // A pass interval or timeout in ms: 0 (off) up to `max`, the worker default when absent.
  const interval = (name: IntervalOption, max = 3_600_000) =>
    optionalInt(options[name], name, 0, max, WORKER_DEFAULTS[name]);
  const weighted = entries.find(
    ([, value]) => typeof value === 'object' && value !== null && value.weight !== undefined,
  );
  if (weighted && slots === null) {
    throw new ValidationError(
      `queues.${weighted[0]}.weight`,
      'weights share the worker-level slots: set slots (total handler slots) too',
    );
  }
  return {
    slots,
    owner,
    queues,
    pollIntervalMs: optionalInt(
      options.pollIntervalMs,
      'pollIntervalMs',
      10,
      3_600_000,
      WORKER_DEFAULTS.pollIntervalMs,
    ),
    listen: optionalBoolean(options.listen, 'listen', clientListen),
    shutdownTimeoutMs: interval('shutdownTimeoutMs'),
    recoveryIntervalMs: interval('recoveryIntervalMs'),
    recoveryBackoff: resolveBackoff(options.recoveryBackoff, 'recoveryBackoff', {
      baseMs: Math.min(WORKER_DEFAULTS.recoveryBackoffBaseMs, clientBackoff.baseMs),
      maxMs: clientBackoff.maxMs,
    }),
    pruneIntervalMs: interval('pruneIntervalMs', 86_400_000),
    agingPassIntervalMs: interval('agingPassIntervalMs'),
    scheduleIntervalMs: interval('scheduleIntervalMs'),
    laneRotationIntervalMs: interval('laneRotationIntervalMs'),
    claimBatchSize: optionalInt(
      options.claimBatchSize,
      'claimBatchSize',
      1,
      MAX_BATCH,
      WORKER_DEFAULTS.claimBatchSize,
    ),
    outcomeBatchDelayMs: optionalInt(
      options.outcomeBatchDelayMs,
      'outcomeBatchDelayMs',
      0,
      1000,
      WORKER_DEFAULTS.outcomeBatchDelayMs,
    ),
    handleSignals: options.handleSignals ?? false,
    ...resolveOutputLimits(options),
  };
}

type QueueEntry = [name: string, value: QueueOptions | JobHandler, schema: StandardSchemaV1 | null];

// The queues given by name and the tasks, as one list; a name may appear only once.
function queueEntries(options: WorkerOptions): QueueEntry[] {
  const { queues, tasks } = options;
  if (queues !== undefined && (typeof queues !== 'object' || queues === null)) {
    throw new ValidationError('queues', 'must be an object of queue name to handler');
  }
  if (tasks !== undefined && !Array.isArray(tasks)) {
    throw new ValidationError('tasks', 'must be an array of tasks made by defineTask');
  }
  const entries: QueueEntry[] = Object.entries(queues ?? {}).map(([name, value]) => [name, value, null]);
  const named = new Set(entries.map(([name]) => name));
  for (const [index, task] of (tasks ?? []).entries()) {
    if (typeof task !== 'object' || task === null || typeof task.name !== 'string' || !task.queue) {
      throw new ValidationError(`tasks[${index}]`, 'must be a task made by defineTask');
    }
    if (named.has(task.name)) {
      throw new ValidationError(
        `tasks[${index}]`,
        `the name ${task.name} is already served by another task or queue of this worker`,
      );
    }
    named.add(task.name);
    entries.push([task.name, task.queue, task.schema ?? null]);
  }
  if (entries.length === 0)
    throw new ValidationError('queues', 'name at least one queue and its handler, or a task');
  return entries;
}
