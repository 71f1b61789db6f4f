import type {
  EnqueueItem,
  EnqueueManyResult,
  EnqueueOptions,
  EnqueueResult,
} from '../../context/client-options.js';
import { connectionFor, type LeaseholdContext } from '../../context/context.js';
import { traceEnqueue } from '../../observability/tracing.js';
import { MAX_ATTEMPTS_LIMIT } from '../../shared/config.js';
import { DEFAULT_MAX_ATTEMPTS, DEFAULT_PRIORITY } from '../../shared/defaults.js';
import { ENQUEUE_ITEM_KEYS, ENQUEUE_OPTION_KEYS, MAX_KEY_CHARS } from '../../shared/enqueue-fields.js';
import { ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import {
  assertQueueName,
  MAX_ENQUEUE_MANY,
  MAX_ENQUEUE_MANY_BYTES,
  optionalInt,
  optionalText,
  optionsObject,
  PRIORITY_LIMIT,
  scheduleFromOptions,
  serialisePayload,
} from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import {
  insertJob,
  insertJobs,
  insertKeyedJob,
  insertOrderedJobs,
  type NewJob,
} from '../../storage/jobs/enqueue.js';
import { retryWhileAnswerLost } from './answer-lost.js';
import { enqueueDeduped, enqueueManyDeduped, parseDedupe } from './enqueue-dedupe.js';
import { enqueueCombined } from './write-combining.js';

const ENQUEUE_OPTIONS: readonly (keyof EnqueueOptions)[] = ENQUEUE_OPTION_KEYS;
const ENQUEUE_ITEM: readonly (keyof EnqueueItem)[] = ENQUEUE_ITEM_KEYS;

/** `lh.enqueue`: one job, joining the caller's transaction with `client`, deduplicated with `idempotencyKey`. */
export async function enqueue(
  context: LeaseholdContext,
  queue: string,
  payload: unknown,
  options?: EnqueueOptions,
): Promise<EnqueueResult> {
  assertQueueName(queue);
  const opts = optionsObject(options);
  rejectUnknownOptions(opts, ENQUEUE_OPTIONS, 'options');
  return traceEnqueue(
    { db: connectionFor(context, opts.client), schema: context.schema, queue, count: 1 },
    () => enqueueOne(context, queue, payload, opts),
    (result) => (result.created ? [result.id] : []),
  );
}

async function enqueueOne(
  context: LeaseholdContext,
  queue: string,
  payload: unknown,
  options: EnqueueOptions,
): Promise<EnqueueResult> {
  const { schema, wakeups } = context;
  const job = newJob(context, { ...options, payload }, 'options');
  const db = connectionFor(context, options.client);
  const dedupe = parseDedupe(options.dedupe, 'options.dedupe', options);
  if (dedupe !== null && job.fairnessKey !== null)
    throw new ValidationError('options.fairnessKey', 'cannot be combined with dedupe yet');
  if (dedupe !== null) return enqueueDeduped(context, db, queue, job, dedupe, options.client !== undefined);
  if (options.idempotencyKey !== undefined) {
    const key = optionalText(options.idempotencyKey, 'options.idempotencyKey', MAX_KEY_CHARS) as string;
    if (job.orderingKey !== null) {
      throw new ValidationError('options.orderingKey', 'cannot be combined with idempotencyKey yet');
    }
    // On a pool, an attempt whose answer was lost (the primary went away) is sent again: the key
    // makes that safe, and finds the job if the first attempt had committed. In a caller's
    // transaction the error is the caller's: the transaction is gone.
    if (options.client !== undefined) return insertKeyedJob(db, schema, queue, job, key);
    if (context.enqueues) return enqueueCombined(context, queue, { job, key });
    return retryWhileAnswerLost(() => insertKeyedJob(db, schema, queue, job, key));
  }
  if (job.orderingKey !== null) {
    const [id] = await insertOrderedJobs(db, schema, queue, [job]);
    return { id: id as string, created: true };
  }
  if (options.client) {
    // Inside the caller's transaction: notify in it, delivered on its commit.
    return { id: await insertJob(db, schema, queue, job), created: true };
  }
  if (context.enqueues) return enqueueCombined(context, queue, { job, key: null });
  const notify = wakeups.notifyInline(queue);
  const id = await insertJob(db, schema, queue, job, { notify });
  if (!notify) wakeups.quietInsertCommitted(queue);
  return { id, created: true };
}

/** `lh.enqueueMany`: many jobs in one statement, all or nothing; ids in input order. */
export async function enqueueMany(
  context: LeaseholdContext,
  queue: string,
  items: readonly EnqueueItem[],
  options?: { client?: Queryable },
): Promise<EnqueueManyResult> {
  assertQueueName(queue);
  const opts = optionsObject(options);
  rejectUnknownOptions(opts, ['client'], 'options');
  return traceEnqueue(
    {
      db: connectionFor(context, opts.client),
      schema: context.schema,
      queue,
      count: Array.isArray(items) ? items.length : 0,
    },
    () => enqueueBatch(context, queue, items, opts),
    // Items folded by a dedupe key name a job another item (or an earlier enqueue) created.
    (result) => (result.created ? result.ids.filter((_, i) => result.created?.[i]) : result.ids),
  );
}

async function enqueueBatch(
  context: LeaseholdContext,
  queue: string,
  items: readonly EnqueueItem[],
  options: { client?: Queryable },
): Promise<EnqueueManyResult> {
  if (!Array.isArray(items) || items.length === 0 || items.length > MAX_ENQUEUE_MANY) {
    throw new ValidationError('items', `must be an array of 1 to ${MAX_ENQUEUE_MANY} jobs`);
  }
  const jobs = items.map((item, index) => {
    const field = `items[${index}]`;
    if (isPayloadOnly(item)) return payloadOnlyJob(context, item.payload, field);
    if (typeof item === 'object' && item !== null) rejectUnknownOptions(item, ENQUEUE_ITEM, field);
    return newJob(context, item, field);
  });
  let bytes = 0;
  for (const job of jobs) bytes += Buffer.byteLength(job.payloadJson, 'utf8');
  if (bytes > MAX_ENQUEUE_MANY_BYTES) {
    throw new ValidationError(
      'items',
      `hold ${bytes} bytes of payload JSON, over the limit of ${MAX_ENQUEUE_MANY_BYTES} for one call; split the batch`,
    );
  }
  const { schema, wakeups } = context;
  const db = connectionFor(context, options.client);
  const dedupes = items.map((item, index) =>
    item.dedupe === undefined ? null : parseDedupe(item.dedupe, `items[${index}].dedupe`, item),
  );
  if (dedupes.some((dedupe) => dedupe !== null)) {
    const keyed = jobs.findIndex((job) => job.fairnessKey !== null);
    if (keyed >= 0)
      throw new ValidationError(
        `items[${keyed}].fairnessKey`,
        'cannot be combined with dedupe in one batch yet',
      );
    return enqueueManyDeduped(context, options.client && db, queue, jobs, dedupes);
  }
  if (jobs.some((job) => job.orderingKey !== null)) {
    return { ids: await insertOrderedJobs(db, schema, queue, jobs) };
  }
  if (options.client) return { ids: await insertJobs(db, schema, queue, jobs) };
  // Autocommit: wake-ups coalesced like single enqueues (see src/context/wakeup-coalescer.ts).
  const notify = wakeups.notifyInline(queue);
  const ids = await insertJobs(db, schema, queue, jobs, { notify });
  if (!notify) wakeups.quietInsertCommitted(queue);
  return { ids };
}

/** True for the commonest bulk item, `{ payload }` and nothing else. */
function isPayloadOnly(item: unknown): item is { payload: unknown } {
  if (typeof item !== 'object' || item === null) return false;
  for (const key in item) if (key !== 'payload') return false;
  return Object.hasOwn(item, 'payload');
}

/**
 * The job of a `{ payload }` item: newJob's answer for it (every other field at its default),
 * without checking options the item does not have (nor building the names of fields it would
 * report): the commonest bulk item pays for nothing it does not carry (issue 28).
 */
function payloadOnlyJob(context: LeaseholdContext, payload: unknown, field: string): NewJob {
  return {
    payloadJson: serialisePayload(payload, context.maxPayloadBytes, `${field}.payload`),
    priority: DEFAULT_PRIORITY,
    runAt: null,
    delayMs: 0,
    maxAttempts: DEFAULT_MAX_ATTEMPTS,
    orderingKey: null,
    concurrencyKey: null,
    fairnessKey: null,
  };
}

/** Validates one job's fields into the row the insert statements take (also used by enqueueFlow). */
export function newJob(
  context: LeaseholdContext,
  item: {
    payload?: unknown;
    priority?: number;
    runAt?: Date;
    delayMs?: number;
    maxAttempts?: number;
    orderingKey?: string;
    concurrencyKey?: string;
    fairnessKey?: string;
  },
  field: string,
): NewJob {
  if (typeof item !== 'object' || item === null) throw new ValidationError(field, 'must be an object');
  const schedule = scheduleFromOptions(item, field);
  return {
    payloadJson: serialisePayload(
      item.payload,
      context.maxPayloadBytes,
      `${field === 'options' ? '' : `${field}.`}payload`,
    ),
    priority: optionalInt(
      item.priority,
      `${field}.priority`,
      -PRIORITY_LIMIT,
      PRIORITY_LIMIT,
      DEFAULT_PRIORITY,
    ),
    runAt: schedule.runAt,
    delayMs: schedule.delayMs,
    maxAttempts: optionalInt(
      item.maxAttempts,
      `${field}.maxAttempts`,
      1,
      MAX_ATTEMPTS_LIMIT,
      DEFAULT_MAX_ATTEMPTS,
    ),
    orderingKey: optionalText(item.orderingKey, `${field}.orderingKey`, MAX_KEY_CHARS),
    concurrencyKey: optionalText(item.concurrencyKey, `${field}.concurrencyKey`, MAX_KEY_CHARS),
    fairnessKey: optionalText(item.fairnessKey, `${field}.fairnessKey`, MAX_KEY_CHARS),
  };
}
