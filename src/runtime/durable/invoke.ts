import type { StandardSchemaV1 } from '@standard-schema/spec';
import { MAX_ATTEMPTS_LIMIT } from '../../shared/config.js';
import { DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES } from '../../shared/defaults.js';
import {
  JobCancelledError,
  JobDeadError,
  type JobErrorSummary,
  ValidationError,
} from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { assertQueueName, optionalInt, PRIORITY_LIMIT, serialisePayload } from '../../shared/validation.js';
import type { InvokedJob } from '../../storage/flows/invoke.js';
import { PermanentError, SnoozeError } from '../run/job-errors.js';
import { assertPayloadMatches } from '../run/payload-schema.js';

/** A task as `job.invoke` takes it (what `defineTask` returns; task.ts is not imported: it imports the job context). */
export interface InvokableTask {
  readonly name: string;
  readonly schema: StandardSchemaV1 | undefined;
  readonly queue: object;
  readonly '~types'?: { readonly input: unknown; readonly output: unknown; readonly result: unknown };
}

/** Options of `job.invoke`: the step's name (default: the queue's), the child's priority and attempts. */
export interface InvokeOptions {
  /** The invoke's step name (1 to 100 letters, digits or `_ - . :`); default the child's queue name. */
  name?: string;
  /** The child job's priority (higher first); default 0. */
  priority?: number;
  /** The child job's attempts in all; default 8. */
  maxAttempts?: number;
}

/** Error codes an invoking job goes dead with when the job it invoked cannot be read. */
export const INVOKE_ERROR_CODES = {
  /** The invoked job was removed by retention before the invoking job read how it ended. */
  removed: 'INVOKED_JOB_REMOVED',
} as const;

/**
 * Thrown by `job.invoke` when the invoked job went dead: `jobId` and `lastError` are the child's.
 * A `JobDeadError` (code `JOB_DEAD`); left uncaught it ends the invoking job dead at once with
 * that code (a retry would read the same end), caught it lets the handler decide.
 */
export class InvokedJobDeadError extends JobDeadError {
  /** Tag the worker reads to classify the failure: no retry. */
  readonly leaseholdOutcome = 'permanent' as const;

  constructor(jobId: string, lastError: JobErrorSummary) {
    super(jobId, lastError);
    this.name = 'InvokedJobDeadError';
    this.message = `invoked job ${jobId} is dead (${lastError.code ?? 'no error code'})`;
  }
}

/** As `InvokedJobDeadError`, for an invoked job that was cancelled (code `JOB_CANCELLED`). */
export class InvokedJobCancelledError extends JobCancelledError {
  /** Tag the worker reads to classify the failure: no retry. */
  readonly leaseholdOutcome = 'permanent' as const;

  constructor(jobId: string, lastError: JobErrorSummary) {
    super(jobId, lastError);
    this.name = 'InvokedJobCancelledError';
    this.message = `invoked job ${jobId} was cancelled`;
  }
}

/** A checked invoke: its step name, and the child job to enqueue. */
export interface InvokeChild {
  name: string;
  queue: string;
  payloadJson: string;
  priority: number;
  maxAttempts: number;
}

const STEP_NAME = /^[A-Za-z0-9_.:-]{1,100}$/;

/**
 * Checks `job.invoke(target, payload, options)` before anything is written: the target (a queue
 * name or a task, whose schema checks the payload), the payload (JSON, at most the default payload
 * limit), and the options.
 */
export async function invokeChild(
  target: unknown,
  payload: unknown,
  options: InvokeOptions | undefined,
): Promise<InvokeChild> {
  let queue: string;
  if (typeof target === 'string') {
    assertQueueName(target, 'invoke target');
    queue = target;
  } else if (typeof target === 'object' && target !== null && (target as InvokableTask).queue) {
    const task = target as InvokableTask;
    assertQueueName(task.name, 'invoke target');
    queue = task.name;
    if (task.schema !== undefined) await assertPayloadMatches(queue, task.schema, payload, 'payload');
  } else {
    throw new ValidationError('invoke target', 'must be a queue name or a task made by defineTask');
  }
  const opts = options ?? {};
  if (typeof opts !== 'object' || opts === null)
    throw new ValidationError('invoke options', 'must be an object');
  rejectUnknownOptions(opts, ['name', 'priority', 'maxAttempts'], 'invoke options');
  const name = opts.name ?? queue;
  if (typeof name !== 'string' || !STEP_NAME.test(name)) {
    throw new ValidationError(
      'invoke name',
      'must be 1 to 100 letters, digits or _ - . : (give options.name for a longer queue name)',
    );
  }
  return {
    name,
    queue,
    payloadJson: serialisePayload(payload ?? null, DEFAULT_MAX_PAYLOAD_BYTES, 'payload'),
    priority: optionalInt(opts.priority, 'invoke priority', -PRIORITY_LIMIT, PRIORITY_LIMIT, 0),
    maxAttempts: optionalInt(
      opts.maxAttempts,
      'invoke maxAttempts',
      1,
      MAX_ATTEMPTS_LIMIT,
      DEFAULT_MAX_ATTEMPTS,
    ),
  };
}

/**
 * What `job.invoke` does with the invoked job as read: its result when it succeeded; a typed error
 * when it went dead or was cancelled; else it has not ended, and the invoking job is handed back
 * (no lease held, no attempt spent) until the child's end releases it (flow-release.ts).
 * `justInvoked`: the child was enqueued by this very call, so the invoking job's hand-back is
 * held back by its edge; on a resume that still finds the child running (an operator's replay of
 * the invoking job), it looks again in a second rather than at once.
 */
export function invokeOutcome(childId: string, child: InvokedJob, justInvoked: boolean): unknown {
  switch (child.status) {
    case 'succeeded':
      return child.result;
    case 'dead':
      throw new InvokedJobDeadError(childId, child.error);
    case 'cancelled':
      throw new InvokedJobCancelledError(childId, child.error);
    case 'removed':
      throw new PermanentError(`invoked job ${childId} was removed before its end was read`, {
        code: INVOKE_ERROR_CODES.removed,
      });
    default:
      throw new SnoozeError(justInvoked ? 0 : 1000);
  }
}

/**
 * `job.invoke`: a task's result type when given a task, else `R` (default unknown). A task is
 * matched by the types `defineTask` gives it (task.ts imports this module, so not by name here).
 */
export interface JobInvoke {
  <T extends InvokableTask>(
    task: T,
    payload: NonNullable<T['~types']>['input'],
    options?: InvokeOptions,
  ): Promise<NonNullable<T['~types']>['result']>;
  <R = unknown>(queue: string, payload: unknown, options?: InvokeOptions): Promise<R>;
}
