import type { EnqueueOptions } from '../../context/client-options.js';
import type { LeaseholdContext } from '../../context/context.js';
import { type JobEnd, WAITERS_CLOSED } from '../../context/job-waiters.js';
import type { AnyTask } from '../../runtime/task.js';
import {
  JobCancelledError,
  JobDeadError,
  JobNotFoundError,
  ValidationError,
  WaitAbortedError,
  WaitTimeoutError,
} from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { assertJobId, optionalInt, optionsObject } from '../../shared/validation.js';
import { enqueue } from './enqueue.js';
import { enqueueTask } from './enqueue-task.js';

/** Options of `lh.waitFor`. */
export interface WaitForOptions {
  /** Give up after this long (`WaitTimeoutError`); default: wait until the job ends. */
  timeoutMs?: number;
  /** Give up when this signal aborts (`WaitAbortedError`, named `AbortError`, `cause`: its reason). */
  signal?: AbortSignal;
}

/** Options of `lh.enqueueAndWait`: those of `enqueue` (but `client`) and those of `waitFor`. */
export type EnqueueAndWaitOptions = Omit<EnqueueOptions, 'client'> & WaitForOptions;

/** What `lh.waitFor` resolves to: the job succeeded, with its handler's result (null when none). */
export interface WaitForResult<Result = unknown> {
  /** The job waited for. */
  id: string;
  status: 'succeeded';
  /** The handler's return value as stored (its JSON form); null when it returned nothing. */
  result: Result;
}

// setTimeout's longest delay.
const MAX_TIMEOUT_MS = 2_147_483_647;
const WAIT_KEYS = ['timeoutMs', 'signal'] as const;

/**
 * `lh.waitFor`: resolves once job `id` has succeeded, with its result; rejects with `JobDeadError`
 * or `JobCancelledError` (the last error summary, never the payload) when it ended otherwise,
 * `JobNotFoundError` when there is no such job (or retention removed it), `WaitTimeoutError`
 * after `timeoutMs`, `WaitAbortedError` when `signal` aborts or the client closes. Wakes on the
 * notification the statement ending the job sends, and polls as a fallback (see context/job-waiters.ts).
 */
export function waitFor(
  context: LeaseholdContext,
  id: string | bigint | number,
  given?: WaitForOptions,
): Promise<WaitForResult> {
  try {
    // Canonical digits ('007' is job 7, assertJobId's answer): notifications and reads name jobs that way.
    const jobId = assertJobId(id);
    const options = optionsObject(given);
    rejectUnknownOptions(options, WAIT_KEYS, 'options');
    return waitChecked(context, jobId, checkWaitOptions(options));
  } catch (err) {
    return Promise.reject(err);
  }
}

/**
 * `lh.enqueueAndWait`: `enqueue` (a task's payload checked as `enqueue` does), then `waitFor` the
 * job it returns (the existing one, for an idempotency key already taken). Refuses `client`: a job
 * enqueued in an open transaction cannot run before that transaction commits.
 */
export async function enqueueAndWait(
  context: LeaseholdContext,
  target: string | AnyTask,
  payload: unknown,
  given?: EnqueueAndWaitOptions,
): Promise<WaitForResult> {
  const options = optionsObject(given);
  if ('client' in options) {
    throw new ValidationError(
      'client',
      'enqueueAndWait cannot join a transaction (the job is not visible until it commits): enqueue with client, commit, then waitFor',
    );
  }
  const { timeoutMs, signal, ...enqueueOptions } = options;
  const wait = checkWaitOptions({ timeoutMs, signal });
  const { id } =
    typeof target === 'string'
      ? await enqueue(context, target, payload, enqueueOptions)
      : await enqueueTask(context, target, payload, enqueueOptions);
  return waitChecked(context, id, wait);
}

function checkWaitOptions(options: WaitForOptions): WaitForOptions {
  const timeoutMs =
    options.timeoutMs === undefined
      ? undefined
      : optionalInt(options.timeoutMs, 'timeoutMs', 0, MAX_TIMEOUT_MS, 0);
  const { signal } = options;
  if (
    signal !== undefined &&
    (typeof signal !== 'object' || signal === null || typeof signal.addEventListener !== 'function')
  ) {
    throw new ValidationError('signal', 'must be an AbortSignal');
  }
  return { timeoutMs, signal };
}

function waitChecked(
  context: LeaseholdContext,
  jobId: string,
  options: WaitForOptions,
): Promise<WaitForResult> {
  const { timeoutMs, signal } = options;
  if (signal?.aborted) {
    return Promise.reject(new WaitAbortedError(jobId, 'its signal was aborted', { cause: signal.reason }));
  }
  return new Promise<WaitForResult>((resolve, reject) => {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let stop: (() => void) | undefined;
    const onAbort = () =>
      finish(() => reject(new WaitAbortedError(jobId, 'its signal was aborted', { cause: signal?.reason })));
    const finish = (answer: () => void) => {
      if (done) return;
      done = true;
      stop?.();
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      answer();
    };
    stop = context.waiters.wait(
      jobId,
      (end) => finish(() => answerEnd(jobId, end, resolve, reject)),
      (err) =>
        finish(() =>
          reject(err === WAITERS_CLOSED ? new WaitAbortedError(jobId, 'the client was closed') : err),
        ),
    );
    if (done) return; // the client was already closed
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => finish(() => reject(new WaitTimeoutError(jobId, timeoutMs))), timeoutMs);
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function answerEnd(
  jobId: string,
  end: JobEnd,
  resolve: (result: WaitForResult) => void,
  reject: (err: unknown) => void,
): void {
  if (end === null) reject(new JobNotFoundError([jobId]));
  else if (end.status === 'succeeded') resolve({ id: jobId, status: 'succeeded', result: end.result });
  else {
    const summary = { code: end.errorCode, class: end.errorClass, message: end.errorMessage };
    reject(
      end.status === 'cancelled' ? new JobCancelledError(jobId, summary) : new JobDeadError(jobId, summary),
    );
  }
}
