import type { LeaseholdContext } from '../../context/context.js';
import type { IdleRunLimits, IdleRunResult } from '../../runtime/idle-run.js';
import type { WorkerOptions } from '../../runtime/options.js';
import { Worker } from '../../runtime/worker.js';
import type { Logger } from '../../runtime/worker-logger.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { optionalInt, optionsObject } from '../../shared/validation.js';

/** Options of `lh.runUntilIdle()`: what to run (queues and tasks, as for a worker) and the bounds. */
export interface RunUntilIdleOptions extends IdleRunLimits {
  /** Queue name to its handler and options, as for `lh.worker()` (with `tasks`, or alone). */
  queues?: WorkerOptions['queues'];
  /** Tasks made by `defineTask`, as for `lh.worker()` (with `queues`, or alone). */
  tasks?: WorkerOptions['tasks'];
  /**
   * Handlers running at once over all queues of this run (the worker's `slots`; default: each
   * queue's own `concurrency`, 10 unless set). A queue's `concurrency` still caps that queue.
   */
  concurrency?: number;
  /** Lease owner name (default hostname:pid:random). */
  owner?: string;
  /** At `maxMs` (or `SIGTERM` with `handleSignals`), how long running handlers may finish (default 10 s). */
  shutdownTimeoutMs?: number;
  /** Largest claim batch (default 500). */
  claimBatchSize?: number;
  /** Stop gracefully on SIGTERM and SIGINT (default false). */
  handleSignals?: boolean;
  /** A pino-compatible logger for the run's worker events (never payloads). */
  logger?: Logger;
}

const KNOWN_KEYS = [
  'queues',
  'tasks',
  'maxMs',
  'maxJobs',
  'concurrency',
  'owner',
  'shutdownTimeoutMs',
  'claimBatchSize',
  'handleSignals',
  'logger',
];

/**
 * `lh.runUntilIdle`: builds a worker for the given queues and tasks (no listener, poll timer or
 * maintenance services) and runs it until nothing is claimable now or a bound is hit; see
 * `Worker.runUntilIdle`. For a cron-driven or serverless runner, and for tests.
 */
export async function runUntilIdle(
  context: LeaseholdContext,
  given: RunUntilIdleOptions,
): Promise<IdleRunResult> {
  const options = optionsObject(given);
  rejectUnknownOptions(options, KNOWN_KEYS, 'options');
  const { maxMs, maxJobs, concurrency, ...workerOptions } = options;
  const slots =
    concurrency === undefined ? {} : { slots: optionalInt(concurrency, 'concurrency', 1, 10_000, 1) };
  const worker = new Worker(context, {
    ...workerOptions,
    ...slots,
    listen: false,
    recoveryIntervalMs: 0,
    pruneIntervalMs: 0,
    agingPassIntervalMs: 0,
    laneRotationIntervalMs: 0,
  });
  return worker.runUntilIdle({ maxMs, maxJobs });
}
