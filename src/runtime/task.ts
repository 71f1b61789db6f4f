import type { StandardSchemaV1 } from '@standard-schema/spec';
import { ValidationError } from '../shared/errors.js';
import { rejectUnknownOptions } from '../shared/unknown-options.js';
import { assertQueueName } from '../shared/validation.js';
import { type BatchHandler, type BatchOptions, resolveBatch } from './batch/batch-options.js';
import { KNOWN_QUEUE_KEYS, type QueueOptions, type WorkerQueueSettings, type WorkerTask } from './options.js';
import type { JobContext } from './run/job-context.js';
import { isStandardSchema } from './run/payload-schema.js';

/** A task's handler: gets the job with its typed payload; resolve to complete it, throw to fail it. */
export type TaskHandler<Payload, Result> = (job: JobContext<Payload>) => Promise<Result>;

/** Options of `defineTask` for a handler of one job, plus every option a worker's queue takes. */
export interface SingleTaskOptions<Payload, Result> extends WorkerQueueSettings {
  /** Runs one job of this task. */
  handler: TaskHandler<Payload, Result>;
  /** Absent: one job per call. */
  batch?: undefined;
}

/** Options of `defineTask` for a handler of a batch of jobs (see `BatchHandler`). */
export interface BatchTaskOptions<Payload, Result> extends WorkerQueueSettings {
  /** Runs a batch of this task's jobs; resolves to nothing or to one result per job. */
  handler: BatchHandler<Payload, Result>;
  /** How many jobs one call gets, and how long a partial batch waits to fill. */
  batch: BatchOptions;
}

/** Options of `defineTask`: a handler of one job, or with `batch` of many. */
export type TaskOptions<Payload, Result> =
  | SingleTaskOptions<Payload, Result>
  | BatchTaskOptions<Payload, Result>;

/**
 * A task made by `defineTask`: a queue name bound to its payload type, schema and handler. Pass it
 * to `lh.enqueue(task, payload)` (the payload is type-checked and validated) and to
 * `lh.worker({ tasks: [task] })`.
 */
export interface Task<Input = unknown, Output = Input, Result = unknown> extends WorkerTask {
  /** The payload validator (any Standard Schema: zod, valibot, arktype...), if the task has one. */
  readonly schema: StandardSchemaV1<Input, Output> | undefined;
  /** Carries the task's types for inference only; never set at run time. */
  readonly '~types'?: { readonly input: Input; readonly output: Output; readonly result: Result };
}

/** Any task, whatever its types. */
export type AnyTask = Task<unknown, unknown, unknown>;

/** The payload `lh.enqueue(task, payload)` accepts: the schema's input type. */
export type TaskPayload<T extends AnyTask> = NonNullable<T['~types']>['input'];

/** The payload a task's handler sees: the schema's output type. */
export type TaskOutput<T extends AnyTask> = NonNullable<T['~types']>['output'];

/** What a task's handler resolves to. */
export type TaskResult<T extends AnyTask> = NonNullable<T['~types']>['result'];

const TASK_KEYS = [...KNOWN_QUEUE_KEYS, 'schema'];

/**
 * Defines a task: `name` is its queue, `schema` (any Standard Schema validator) checks payloads at
 * enqueue and again when a worker claims them, and `handler` gets `job.payload` typed as the
 * schema's output. Without a schema, name the payload type: `defineTask<{ id: string }>(...)`.
 * Options are checked here (unknown keys, the name); the queue options are resolved by the worker.
 */
export function defineTask<Schema extends StandardSchemaV1, Result = unknown>(
  name: string,
  options: BatchTaskOptions<StandardSchemaV1.InferOutput<Schema>, Result> & { schema: Schema },
): Task<StandardSchemaV1.InferInput<Schema>, StandardSchemaV1.InferOutput<Schema>, Result>;
export function defineTask<Payload = unknown, Result = unknown>(
  name: string,
  options: BatchTaskOptions<Payload, Result> & { schema?: undefined },
): Task<Payload, Payload, Result>;
export function defineTask<Schema extends StandardSchemaV1, Result = unknown>(
  name: string,
  options: SingleTaskOptions<StandardSchemaV1.InferOutput<Schema>, Result> & { schema: Schema },
): Task<StandardSchemaV1.InferInput<Schema>, StandardSchemaV1.InferOutput<Schema>, Result>;
export function defineTask<Payload = unknown, Result = unknown>(
  name: string,
  options: SingleTaskOptions<Payload, Result> & { schema?: undefined },
): Task<Payload, Payload, Result>;
export function defineTask(
  name: string,
  options: TaskOptions<unknown, unknown> & { schema?: StandardSchemaV1 },
): AnyTask {
  assertQueueName(name, 'name');
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('options', `task ${name}: must be an object with a handler`);
  }
  rejectUnknownOptions(options, TASK_KEYS, `task ${name}`);
  if (typeof options.handler !== 'function') {
    throw new ValidationError('options.handler', `task ${name}: must be an async function (job) => ...`);
  }
  resolveBatch(options.batch, 'options.batch'); // a bad batch is refused here, not first at the worker
  const { schema, ...queue } = options;
  if (schema !== undefined && !isStandardSchema(schema)) {
    throw new ValidationError(
      'options.schema',
      `task ${name}: must be a Standard Schema validator (zod, valibot, arktype...: an object with ~standard.validate)`,
    );
  }
  return Object.freeze({ name, schema, queue: queue as QueueOptions });
}
