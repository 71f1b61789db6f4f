/**
 * The argument bounds of the SECURITY DEFINER functions (functions.ts; issue 32, migration 021).
 *
 * A function's body is the library's statement, which trusts its parameters as the TypeScript
 * above it checked them. A producer or worker credential calling the function directly bypasses
 * that TypeScript, so each function checks the same bounds first: one SELECT before the statement
 * (its text unchanged) calls `refuse_argument(ok, message)` (021) per bound, which raises SQLSTATE
 * 22023 on the first that fails, before anything is written. A bound names an argument by its
 * position ($n, as the statement does) and says what the API accepts there; the values mirror the
 * API's own limits (imported, so the two cannot drift apart).
 * test/hostile/hostile-roles.test.ts calls every function with each bound broken.
 */
import { MAX_ATTEMPTS_LIMIT, MAX_LEASE_MS } from '../../shared/config.js';
import {
  MAX_ERROR_MESSAGE,
  MAX_ERROR_STACK,
  MAX_EVENT_KEY,
  MAX_SLEEP_MS,
  MAX_STEP_NAME,
  MAX_STEPS,
} from '../../shared/limits.js';
import {
  MAX_BATCH,
  MAX_ENQUEUE_MANY,
  MAX_PAYLOAD_BYTES_LIMIT,
  PRIORITY_LIMIT,
} from '../../shared/validation.js';
import { quoteIdent } from '../db.js';
import { finishedChannel } from '../finish-notices.js';
import { wakeupChannel } from '../jobs/enqueue.js';

/** One argument's bound; `arg` is its position ($1 is 1). */
export type ArgumentBound =
  /** A number within [min, max]; NULL refused (a NULL limit is no limit, a NULL lease never lapses). */
  | { readonly arg: number; readonly kind: 'range'; readonly min: number; readonly max: number }
  /** Every element of an array within [min, max]; NULL elements refused unless `nulls`. */
  | {
      readonly arg: number;
      readonly kind: 'each-range';
      readonly min: number;
      readonly max: number;
      readonly nulls?: boolean;
    }
  /** An array of at most `max` elements. */
  | { readonly arg: number; readonly kind: 'items'; readonly max: number }
  /** A JSON array (jsonb) of at most `max` elements; NULL refused. */
  | { readonly arg: number; readonly kind: 'json-items'; readonly max: number }
  /** A text of `min` to `max` characters (NULL passes: the statement decides what NULL means). */
  | { readonly arg: number; readonly kind: 'chars'; readonly min: number; readonly max: number }
  /** Every element of a text array at most `max` characters. */
  | { readonly arg: number; readonly kind: 'each-chars'; readonly max: number }
  /** Every element of a text array at most `max` bytes (JSON texts: results, progress). */
  | { readonly arg: number; readonly kind: 'each-bytes'; readonly max: number }
  /** The schema's own notification channel, nothing else: a worker may not notify other channels. */
  | { readonly arg: number; readonly kind: 'channel'; readonly channel: 'wakeup' | 'finished' }
  /** A text matching `pattern` (a POSIX regular expression), NULL refused. */
  | { readonly arg: number; readonly kind: 'matches'; readonly pattern: string; readonly sample: string };

const QUEUE = 128; // assertQueueName
const OWNER = 200; // assertOwner
const DAY_MS = MAX_LEASE_MS;
/** Delays of fail and snooze: at most 30 days (operations/leases.ts, runtime/run/failure-outcome.ts). */
const MAX_DELAY_MS = 30 * DAY_MS;
/** Enqueue delays: at most ten years (scheduleFromOptions). */
const MAX_ENQUEUE_DELAY_MS = 10 * 365 * DAY_MS;
/**
 * Leases one fenced batch presents: a worker sends one statement per queue for everything it holds
 * there (concurrency and prefetch of at most 1,000 each); lh.complete and friends take MAX_BATCH.
 */
const FENCED_BATCH = 10 * MAX_BATCH;
const EFFECT_NAME = 100; // runtime/durable/effects.ts
const EFFECT_KEY = 1000;
const ERROR_CODE = 64; // sanitiseErrorCode
const ERROR_CLASS = 100; // runtime/run/error-details.ts
// W3C trace context: version, trace id, parent id, flags.
const TRACEPARENT = '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$';
const ANY_COUNT = Number.MAX_SAFE_INTEGER;

const queue = (arg: number): ArgumentBound => ({ arg, kind: 'chars', min: 1, max: QUEUE });
const owner = (arg: number): ArgumentBound => ({ arg, kind: 'chars', min: 1, max: OWNER });
const lease = (arg: number): ArgumentBound => ({ arg, kind: 'range', min: 1, max: MAX_LEASE_MS });
/** The five arrays of the fence ($1..$5: ids, tokens, claim ids, owners, queues). */
const fence: readonly ArgumentBound[] = [
  { arg: 1, kind: 'items', max: FENCED_BATCH },
  { arg: 4, kind: 'each-chars', max: OWNER },
  { arg: 5, kind: 'each-chars', max: QUEUE },
];
const failTexts: readonly ArgumentBound[] = [
  { arg: 11, kind: 'each-chars', max: ERROR_CODE },
  { arg: 12, kind: 'each-chars', max: ERROR_CLASS },
  { arg: 13, kind: 'each-chars', max: MAX_ERROR_MESSAGE },
  { arg: 14, kind: 'each-chars', max: MAX_ERROR_STACK },
];
const insertMany = (first: number): readonly ArgumentBound[] => [
  { arg: first, kind: 'items', max: MAX_ENQUEUE_MANY },
  { arg: first + 3, kind: 'each-range', min: 0, max: MAX_ENQUEUE_DELAY_MS, nulls: true },
  { arg: first + 4, kind: 'each-range', min: 1, max: MAX_ATTEMPTS_LIMIT },
];
/** A uniform batch (enqueue.ts): $2 a JSON array of payloads, $3 the priority, $4 the attempts. */
const insertUniform: readonly ArgumentBound[] = [
  queue(1),
  { arg: 2, kind: 'json-items', max: MAX_ENQUEUE_MANY },
  { arg: 3, kind: 'range', min: -PRIORITY_LIMIT, max: PRIORITY_LIMIT },
  { arg: 4, kind: 'range', min: 1, max: MAX_ATTEMPTS_LIMIT },
];
const insertOne: readonly ArgumentBound[] = [
  queue(1),
  { arg: 5, kind: 'range', min: 0, max: MAX_ENQUEUE_DELAY_MS },
  { arg: 6, kind: 'range', min: 1, max: MAX_ATTEMPTS_LIMIT },
];

const eventName = (arg: number): ArgumentBound => ({ arg, kind: 'chars', min: 1, max: MAX_STEP_NAME });
const eventKey = (arg: number): ArgumentBound => ({ arg, kind: 'chars', min: 1, max: MAX_EVENT_KEY });
const schemaName = (arg: number): ArgumentBound => ({ arg, kind: 'chars', min: 1, max: 63 });
/** Durable events (025): names and keys as the API bounds them, timeouts and retention at most a year. */
const EVENT_BOUNDS: Record<string, readonly ArgumentBound[]> = {
  wait_begin: [
    owner(4),
    queue(5),
    { arg: 6, kind: 'range', min: 0, max: MAX_STEPS - 1 },
    { arg: 7, kind: 'chars', min: 3, max: MAX_STEP_NAME + 10 },
    eventName(8),
    eventKey(9),
    { arg: 10, kind: 'range', min: 0, max: MAX_SLEEP_MS },
  ],
  wait_resolve: [
    owner(4),
    queue(5),
    { arg: 6, kind: 'range', min: 0, max: MAX_STEPS - 1 },
    { arg: 7, kind: 'range', min: 0, max: MAX_SLEEP_MS },
  ],
  event_lock_wait: [schemaName(1), eventName(2), eventKey(3)],
  event_lock_shared: [schemaName(1), eventName(2), eventKey(3)],
  event_send: [
    eventName(1),
    eventKey(2),
    { arg: 4, kind: 'range', min: 0, max: MAX_SLEEP_MS },
    { arg: 5, kind: 'channel', channel: 'wakeup' },
  ],
  /** job.invoke (026): the child's queue, priority and attempts as an enqueue bounds them. */
  invoke_begin: [
    owner(4),
    queue(5),
    { arg: 6, kind: 'range', min: 0, max: MAX_STEPS - 1 },
    { arg: 7, kind: 'chars', min: 3, max: MAX_STEP_NAME + 10 },
    queue(8),
    { arg: 10, kind: 'range', min: -PRIORITY_LIMIT, max: PRIORITY_LIMIT },
    { arg: 11, kind: 'range', min: 1, max: MAX_ATTEMPTS_LIMIT },
    { arg: 12, kind: 'channel', channel: 'wakeup' },
  ],
  invoke_outcome: [owner(4), queue(5), queue(7)],
};

/** The bounds of each function, by its statement's label (every function has some). */
export const FUNCTION_BOUNDS: Readonly<Record<string, readonly ArgumentBound[]>> = {
  claim_jobs: [queue(1), owner(2), { arg: 3, kind: 'range', min: 1, max: MAX_BATCH }, lease(4)],
  claim_jobs_limited: [
    queue(1),
    owner(2),
    { arg: 3, kind: 'range', min: 1, max: MAX_BATCH },
    lease(4),
    { arg: 5, kind: 'range', min: 1, max: MAX_BATCH },
  ],
  claim_jobs_throttled: [
    queue(1),
    owner(2),
    { arg: 3, kind: 'range', min: 1, max: MAX_BATCH },
    lease(4),
    { arg: 5, kind: 'range', min: 1, max: MAX_BATCH },
    { arg: 7, kind: 'range', min: 0, max: DAY_MS },
  ],
  claim_jobs_limited_fair: [
    queue(1),
    owner(2),
    { arg: 3, kind: 'range', min: 1, max: MAX_BATCH },
    lease(4),
    { arg: 5, kind: 'range', min: 1, max: MAX_BATCH },
  ],
  claim_jobs_fair: [queue(1), owner(2), { arg: 3, kind: 'range', min: 1, max: MAX_BATCH }, lease(4)],
  extend_leases: [
    ...fence,
    { arg: 6, kind: 'each-range', min: 1, max: MAX_LEASE_MS },
    { arg: 7, kind: 'each-bytes', max: MAX_PAYLOAD_BYTES_LIMIT },
  ],
  complete_jobs: [
    ...fence,
    { arg: 6, kind: 'channel', channel: 'wakeup' },
    { arg: 7, kind: 'channel', channel: 'finished' },
  ],
  complete_jobs_with_results: [
    ...fence,
    { arg: 6, kind: 'channel', channel: 'wakeup' },
    { arg: 7, kind: 'each-bytes', max: MAX_PAYLOAD_BYTES_LIMIT },
    { arg: 8, kind: 'channel', channel: 'finished' },
  ],
  complete_jobs_plain: [...fence, { arg: 6, kind: 'channel', channel: 'finished' }],
  complete_jobs_plain_with_results: [
    ...fence,
    { arg: 6, kind: 'each-bytes', max: MAX_PAYLOAD_BYTES_LIMIT },
    { arg: 7, kind: 'channel', channel: 'finished' },
  ],
  fail_jobs: [
    ...fence,
    { arg: 7, kind: 'each-range', min: 0, max: MAX_DELAY_MS, nulls: true },
    { arg: 8, kind: 'each-range', min: 0, max: MAX_LEASE_MS },
    { arg: 9, kind: 'each-range', min: 0, max: 30 * MAX_LEASE_MS },
    { arg: 10, kind: 'each-range', min: 1, max: MAX_ATTEMPTS_LIMIT, nulls: true },
    ...failTexts,
    { arg: 15, kind: 'channel', channel: 'finished' },
    { arg: 16, kind: 'channel', channel: 'wakeup' },
  ],
  snooze_jobs: [...fence, { arg: 6, kind: 'each-range', min: 0, max: MAX_DELAY_MS }],
  snooze_waiting_jobs: [...fence, { arg: 6, kind: 'each-range', min: 0, max: MAX_DELAY_MS }],
  effect_begin: [
    owner(4),
    queue(5),
    { arg: 6, kind: 'chars', min: 1, max: EFFECT_NAME },
    { arg: 7, kind: 'chars', min: 0, max: EFFECT_KEY },
  ],
  effect_record_result: [owner(4), queue(5), { arg: 6, kind: 'chars', min: 1, max: EFFECT_NAME }],
  effect_rearm: [owner(4), queue(5), { arg: 6, kind: 'chars', min: 1, max: EFFECT_NAME }],
  step_list: [owner(4), queue(5)],
  step_record: [
    owner(4),
    queue(5),
    { arg: 6, kind: 'range', min: 0, max: MAX_STEPS - 1 },
    // The name with its occurrence: `a#0` at the shortest.
    { arg: 7, kind: 'chars', min: 3, max: MAX_STEP_NAME + 10 },
    { arg: 8, kind: 'matches', pattern: '^(step|sleep)$', sample: 'step' },
  ],
  ...EVENT_BOUNDS,
  record_refusal: [queue(1), owner(3)],
  recover_expired_leases: [
    { arg: 1, kind: 'range', min: 1, max: ANY_COUNT },
    { arg: 2, kind: 'range', min: 0, max: MAX_LEASE_MS },
    { arg: 3, kind: 'range', min: 0, max: 30 * MAX_LEASE_MS },
    { arg: 4, kind: 'channel', channel: 'wakeup' },
    { arg: 5, kind: 'channel', channel: 'finished' },
  ],
  age_pending_jobs: [queue(1), { arg: 2, kind: 'range', min: 1, max: ANY_COUNT }],
  repair_listed_ordering_keys: [
    { arg: 1, kind: 'items', max: FENCED_BATCH },
    { arg: 3, kind: 'range', min: 1, max: ANY_COUNT },
    { arg: 4, kind: 'channel', channel: 'wakeup' },
  ],
  repair_headless_ordering_keys: [
    { arg: 1, kind: 'range', min: 1, max: ANY_COUNT },
    { arg: 2, kind: 'channel', channel: 'wakeup' },
  ],
  repair_scan_ordering_keys: [
    { arg: 1, kind: 'range', min: 1, max: ANY_COUNT },
    { arg: 2, kind: 'channel', channel: 'wakeup' },
  ],
  enqueue_one: [...insertOne, { arg: 7, kind: 'channel', channel: 'wakeup' }],
  enqueue_one_quiet: insertOne,
  enqueue_many: [queue(1), ...insertMany(2), { arg: 7, kind: 'channel', channel: 'wakeup' }],
  enqueue_many_quiet: [queue(1), ...insertMany(2)],
  enqueue_many_uniform: [
    ...insertUniform,
    { arg: 5, kind: 'channel', channel: 'wakeup' },
    { arg: 6, kind: 'items', max: MAX_ENQUEUE_MANY },
  ],
  enqueue_many_uniform_quiet: [...insertUniform, { arg: 6, kind: 'items', max: MAX_ENQUEUE_MANY }],
  enqueue_keyed: [queue(1), ...insertMany(2), { arg: 7, kind: 'channel', channel: 'wakeup' }],
  enqueue_ordered: [queue(1), ...insertMany(2), { arg: 7, kind: 'channel', channel: 'wakeup' }],
  // The fairness key itself is bounded by its column's CHECK (022), as concurrency keys are (003).
  enqueue_many_fair: [queue(1), ...insertMany(2), { arg: 7, kind: 'channel', channel: 'wakeup' }],
  enqueue_many_fair_quiet: [queue(1), ...insertMany(2)],
  enqueue_keyed_fair: [queue(1), ...insertMany(2), { arg: 7, kind: 'channel', channel: 'wakeup' }],
  enqueue_ordered_fair: [queue(1), ...insertMany(2), { arg: 7, kind: 'channel', channel: 'wakeup' }],
  enqueue_deduped: [queue(1), ...insertMany(2), { arg: 7, kind: 'channel', channel: 'wakeup' }],
  enqueue_flow: [
    ...insertMany(2),
    { arg: 1, kind: 'items', max: MAX_ENQUEUE_MANY },
    { arg: 14, kind: 'channel', channel: 'wakeup' },
  ],
  attach_traceparent: [
    { arg: 1, kind: 'items', max: MAX_ENQUEUE_MANY },
    {
      arg: 2,
      kind: 'matches',
      pattern: TRACEPARENT,
      sample: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    },
  ],
};

/** SQL text of a string literal (standard_conforming_strings, which PostgreSQL has on since 9.1). */
function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/** The condition that holds when `bound` is met, over the function's own arguments. */
function condition(schema: string, bound: ArgumentBound): string {
  const a = `$${bound.arg}`;
  switch (bound.kind) {
    case 'range':
      return `coalesce(${a} BETWEEN ${bound.min} AND ${bound.max}, false)`;
    case 'each-range':
      return `NOT EXISTS (SELECT FROM pg_catalog.unnest(${a}) AS v WHERE ${
        bound.nulls ? '' : 'v IS NULL OR '
      }NOT (v BETWEEN ${bound.min} AND ${bound.max}))`;
    case 'items':
      return `coalesce(pg_catalog.cardinality(${a}), 0) <= ${bound.max}`;
    case 'json-items':
      // CASE, not AND: jsonb_array_length raises on a non-array before AND could skip it.
      return `coalesce(CASE WHEN pg_catalog.jsonb_typeof(${a}) = 'array' THEN pg_catalog.jsonb_array_length(${a}) <= ${bound.max} END, false)`;
    case 'chars':
      return `coalesce(pg_catalog.char_length(${a}) BETWEEN ${bound.min} AND ${bound.max}, true)`;
    case 'each-chars':
      return `NOT EXISTS (SELECT FROM pg_catalog.unnest(${a}) AS v WHERE pg_catalog.char_length(v) > ${bound.max})`;
    case 'each-bytes':
      return `NOT EXISTS (SELECT FROM pg_catalog.unnest(${a}) AS v WHERE pg_catalog.octet_length(v) > ${bound.max})`;
    case 'channel':
      return `${a} IS NOT DISTINCT FROM ${literal(
        bound.channel === 'wakeup' ? wakeupChannel(schema) : finishedChannel(schema),
      )}`;
    case 'matches':
      return `coalesce(${a} ~ ${literal(bound.pattern)}, false)`;
  }
}

/** What a refusal says: the function, the argument and what it must be. */
export function boundMessage(label: string, bound: ArgumentBound): string {
  const what = (() => {
    switch (bound.kind) {
      case 'range':
        return `a number from ${bound.min} to ${bound.max}`;
      case 'each-range':
        return `numbers from ${bound.min} to ${bound.max}${bound.nulls ? ' (or null)' : ''}`;
      case 'items':
        return `an array of at most ${bound.max} elements`;
      case 'json-items':
        return `a JSON array of at most ${bound.max} elements`;
      case 'chars':
        return `${bound.min} to ${bound.max} characters`;
      case 'each-chars':
        return `texts of at most ${bound.max} characters`;
      case 'each-bytes':
        return `texts of at most ${bound.max} bytes`;
      case 'channel':
        return `this schema's ${bound.channel} channel`;
      case 'matches':
        return `a text matching ${bound.pattern}`;
    }
  })();
  return `${label}: argument $${bound.arg} must be ${what}`;
}

/**
 * The statement a function runs before its own: one SELECT checking every bound in order (the
 * first that fails refuses the call), or '' for a function without bounds.
 */
export function boundsCheck(schema: string, label: string): string {
  const bounds = FUNCTION_BOUNDS[label] ?? [];
  if (bounds.length === 0) return '';
  const refuse = `${quoteIdent(schema)}.refuse_argument`;
  const calls = bounds.map(
    (bound) => `${refuse}(${condition(schema, bound)}, ${literal(boundMessage(label, bound))})`,
  );
  return `\n  SELECT ${calls.join(',\n         ')};\n`;
}
