/**
 * The option names and limits of an enqueue, in one place: `lh.enqueue` and `lh.enqueueMany` check
 * options against them (operations/enqueue.ts, operations/enqueue-dedupe.ts), the schema's stable
 * SQL API checks the same (storage/roles/sql-api.ts), and the docs test finds each name in docs/api.md.
 */

/** A job's own fields, taken by `lh.enqueue`'s options and by each `lh.enqueueMany` item. */
export const JOB_FIELDS = [
  'priority',
  'runAt',
  'delayMs',
  'maxAttempts',
  'orderingKey',
  'concurrencyKey',
] as const;

/** Every option `lh.enqueue` accepts. */
export const ENQUEUE_OPTION_KEYS = [
  ...JOB_FIELDS,
  'fairnessKey',
  'client',
  'idempotencyKey',
  'dedupe',
] as const;

/** Every key of an `lh.enqueueMany` item. */
export const ENQUEUE_ITEM_KEYS = ['payload', ...JOB_FIELDS, 'fairnessKey', 'dedupe'] as const;

/** The keys of the `dedupe` option. */
export const DEDUPE_FIELDS = ['key', 'mode', 'windowMs'] as const;

/** The modes of the `dedupe` option. */
export const DEDUPE_MODES = ['throttle', 'debounce', 'replace'] as const;

/** Longest dedupe window accepted, in ms (366 days). */
export const MAX_DEDUPE_WINDOW_MS = 366 * 86_400_000;

/** Longest idempotency, ordering, concurrency or dedupe key, in characters (UTF-16 code units). */
export const MAX_KEY_CHARS = 200;

/** Longest enqueue delay (`delayMs`), in ms: ten years. */
export const MAX_ENQUEUE_DELAY_MS = 10 * 365 * 86_400_000;
