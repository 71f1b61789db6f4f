import type { Leasehold } from '../client.js';
import type { RunUntilIdleOptions } from '../operations/worker/run-until-idle.js';
import type { IdleRunLimits, IdleRunResult } from '../runtime/idle-run.js';
import type { Worker } from '../runtime/worker.js';
import { ValidationError } from '../shared/errors.js';
import { TestExpectationError } from './errors.js';

/** How long `drain` waits for idle unless told (`maxMs`), so a hung handler fails the test instead of hanging it. */
export const DEFAULT_DRAIN_MS = 10_000;

/**
 * Runs everything claimable to idle, on real PostgreSQL, and resolves with what ran (see
 * `IdleRunResult`): with a worker (not started; it may be drained again), its queues and tasks;
 * with a client, the `queues` / `tasks` given, as `lh.runUntilIdle`. Jobs its handlers enqueue, and
 * retries due at once, run too; retries in backoff do not. Unlike `runUntilIdle`, it bounds the
 * wait by `maxMs` (default 10 s) and throws a `TestExpectationError` when that bound ends it.
 */
export async function drain(worker: Worker, limits?: IdleRunLimits): Promise<IdleRunResult>;
export async function drain(lh: Leasehold, options: RunUntilIdleOptions): Promise<IdleRunResult>;
export async function drain(
  target: Worker | Leasehold,
  options?: IdleRunLimits | RunUntilIdleOptions,
): Promise<IdleRunResult> {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new ValidationError('options', 'must be an object');
  }
  const maxMs = options?.maxMs ?? DEFAULT_DRAIN_MS;
  let result: IdleRunResult;
  if (isClient(target)) {
    if (options === undefined) throw new ValidationError('options', 'name the queues or tasks to drain');
    result = await target.runUntilIdle({ ...options, maxMs });
  } else if (typeof (target as Worker | null)?.runUntilIdle === 'function') {
    result = await target.runUntilIdle({ ...options, maxMs });
  } else {
    throw new ValidationError('target', 'must be a worker (lh.worker(...)) or a Leasehold client');
  }
  if (result.endedBy === 'maxMs') {
    throw new TestExpectationError(
      `drain: still not idle after ${maxMs} ms (${result.succeeded} succeeded, ${result.failed} failed): ` +
        'a handler is still running or jobs keep arriving; pass a larger maxMs if the work is meant to take longer',
    );
  }
  return result;
}

// A client has `worker()`; a worker does not.
function isClient(target: unknown): target is Leasehold {
  return typeof (target as Leasehold | null)?.worker === 'function';
}
