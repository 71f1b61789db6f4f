import { MAX_ENQUEUE_DELAY_MS } from './enqueue-fields.js';
import { ValidationError } from './errors.js';
import { rejectUnknownOptions } from './unknown-options.js';

export { DEFAULT_MAX_PAYLOAD_BYTES } from './defaults.js';
export { rejectUnknownOptions } from './unknown-options.js';
/**
 * Largest `maxPayloadBytes` a client accepts. Stored as jsonb, a payload can take up to six times
 * its JSON size (`[0,0,...]`), so anything under this limit fits the database's own bound below.
 */
export const MAX_PAYLOAD_BYTES_LIMIT = 8 * 1024 * 1024;
/**
 * The database's backstop on a payload, as `pg_column_size` (jsonb bytes), enforced by the
 * `jobs_payload_size` constraint of migration 007 for every writer, the client or not.
 */
export const DATABASE_PAYLOAD_LIMIT_BYTES = 64 * 1024 * 1024;
/** Largest batch a single claim, enqueueMany or maintenance statement will take. */
export const MAX_BATCH = 1000;
/** Largest number of jobs one `enqueueMany` call accepts (sent in one statement). */
export const MAX_ENQUEUE_MANY = 10_000;
/**
 * Largest total of payload JSON one `enqueueMany` call sends. The batch travels as one jsonb array,
 * which PostgreSQL caps at 256 MB of jsonb; at the worst expansion (six times) this stays below it.
 */
export const MAX_ENQUEUE_MANY_BYTES = 32 * 1024 * 1024;

const QUEUE_NAME = /^[A-Za-z0-9_.:-]{1,128}$/;
// Lower-case so the quoted and unquoted spellings name the same schema; short enough that
// derived names (the NOTIFY channel, prepared statement names) stay under PostgreSQL's 63 bytes.
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,39}$/;
// PostgreSQL refuses to create schemas named pg_*, and information_schema is the system's own.
const RESERVED_SCHEMA = /^(pg_|information_schema$)/;
const ERROR_CODE = /[^A-Za-z0-9_.:-]/g;
// A lone UTF-16 surrogate: the driver would send it as U+FFFD, so two different strings could be
// stored as one (two idempotency keys colliding, for one).
const LONE_SURROGATE = /\p{Cs}/u;
// In JSON text from JSON.stringify, a \u escape of NUL or of a lone surrogate, both of which jsonb
// refuses. Only an escape after an even run of backslashes counts: `\\u0000` is an escaped
// backslash followed by the text u0000, which jsonb stores fine.
const UNSTORABLE_ESCAPE = /(?<!\\)(?:\\\\)*\\u(0000|d[89a-f][0-9a-f]{2})/;

/** Throws `ValidationError` unless `name` is a usable queue name. */
export function assertQueueName(name: unknown, field = 'queue'): asserts name is string {
  if (typeof name !== 'string' || !QUEUE_NAME.test(name)) {
    throw new ValidationError(
      field,
      `must be 1 to 128 characters of letters, digits and _ - . : (got ${describe(name)})`,
    );
  }
}

/** Throws `ValidationError` unless `name` is a usable schema name. */
export function assertSchemaName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || !SCHEMA_NAME.test(name)) {
    throw new ValidationError(
      'schema',
      'must start with a lower-case letter or _ and hold at most 40 lower-case letters, digits or _ (got ' +
        describe(name) +
        ')',
    );
  }
  if (RESERVED_SCHEMA.test(name)) {
    throw new ValidationError(
      'schema',
      `must not be a PostgreSQL system schema name (got ${describe(name)})`,
    );
  }
}

/** Throws unless `value` is an integer within [min, max]; returns it. */
export function assertInt(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(field, `must be an integer from ${min} to ${max} (got ${describe(value)})`);
  }
  return value;
}

/** Like `assertInt`, but `undefined` yields `fallback`. */
export function optionalInt(
  value: unknown,
  field: string,
  min: number,
  max: number,
  fallback: number,
): number {
  return value === undefined ? fallback : assertInt(value, field, min, max);
}

/** Throws unless `id` is a positive bigint (given as a string, bigint or safe integer); returns it as text. */
export function assertJobId(id: unknown, field = 'id'): string {
  const text = typeof id === 'bigint' || typeof id === 'number' ? String(id) : id;
  if (typeof text !== 'string' || !/^[0-9]{1,19}$/.test(text) || BigInt(text) > 9_223_372_036_854_775_807n) {
    throw new ValidationError(field, 'must be a positive bigint (as a string)');
  }
  // Canonical digits ('007' is job 7): the database answers by its own text of the id, and a
  // caller's set of accepted ids is looked up with this one.
  return text.length > 1 && text.startsWith('0') ? BigInt(text).toString() : text;
}

/** Throws unless `claimId` is a signed 64-bit integer as a decimal string (a lease's claim id). */
export function assertClaimId(claimId: unknown, field = 'lease.claimId'): string {
  if (
    typeof claimId !== 'string' ||
    !/^-?[0-9]{1,19}$/.test(claimId) ||
    BigInt(claimId) > 9_223_372_036_854_775_807n ||
    BigInt(claimId) < -9_223_372_036_854_775_808n
  ) {
    throw new ValidationError(
      field,
      'must be the claim id of a Lease from claim() (a 64-bit integer as a string)',
    );
  }
  return claimId;
}

/**
 * Throws unless `value` is a string of 1 to `max` UTF-16 code units, not only white space, that
 * PostgreSQL stores exactly (no NUL, no lone surrogate); returns it.
 */
export function assertText(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > max) {
    throw new ValidationError(field, `must be a non-empty string of at most ${max} characters`);
  }
  assertStorableText(value, field);
  return value;
}

/** Throws unless `value` is a string of 1 to 200 characters PostgreSQL stores exactly: a lease owner. */
export function assertOwner(value: unknown, field = 'owner'): asserts value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 200) {
    throw new ValidationError(field, 'must be a string of 1 to 200 characters');
  }
  assertStorableText(value, field);
}

// PostgreSQL text cannot hold NUL, and the driver turns a lone surrogate into U+FFFD.
function assertStorableText(value: string, field: string): void {
  if (value.includes('\u0000')) {
    throw new ValidationError(field, 'contains a NUL character, which PostgreSQL text cannot store');
  }
  if (LONE_SURROGATE.test(value)) {
    throw new ValidationError(field, 'contains a lone UTF-16 surrogate (not well-formed Unicode)');
  }
}

/** Like `assertText`, but `undefined` yields null. */
export function optionalText(value: unknown, field: string, max: number): string | null {
  return value === undefined ? null : assertText(value, field, max);
}

/** Throws unless `value` is a valid Date; `undefined` yields null. */
export function optionalDate(value: unknown, field: string): Date | null {
  if (value === undefined) return null;
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new ValidationError(field, 'must be a valid Date');
  }
  return value;
}

/** Throws unless `value` is a boolean; `undefined` yields `fallback`. */
export function optionalBoolean(value: unknown, field: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new ValidationError(field, 'must be true or false');
  return value;
}

/** The options object a method was given: `undefined` yields `{}`; anything but a plain object is refused. */
export function optionsObject<T extends object>(value: T | undefined, field = 'options'): T {
  if (value === undefined) return {} as T;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ValidationError(field, 'must be an object');
  }
  return value;
}

/** Serialises a payload to JSON text, refusing what JSON cannot carry and what is too large. */
export function serialisePayload(
  payload: unknown,
  maxBytes: number,
  field = 'payload',
  replacer?: (key: string, value: unknown) => unknown,
): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(payload, replacer);
  } catch (err) {
    throw new ValidationError(field, `is not JSON-serialisable (${unserialisable(err)})`);
  }
  if (text === undefined) {
    throw new ValidationError(field, 'is not JSON-serialisable (undefined, a function or a symbol)');
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) {
    throw new ValidationError(field, `is ${bytes} bytes as JSON, over the limit of ${maxBytes}`);
  }
  // Each level costs at least two characters, so a short text cannot be too deep: most are not scanned.
  if (text.length > 2 * MAX_JSON_DEPTH && jsonDepthOver(text, MAX_JSON_DEPTH)) {
    throw new ValidationError(
      field,
      `is not JSON-serialisable here (nested more than ${MAX_JSON_DEPTH} levels deep)`,
    );
  }
  // jsonb refuses NUL and lone surrogates (JSON.stringify escapes both as \u....): refuse them here
  // with a clear error rather than a driver error. Most payloads hold no \u escape at all.
  const unstorable = text.includes('\\u') ? UNSTORABLE_ESCAPE.exec(text) : null;
  if (unstorable?.[1] === '0000') {
    throw new ValidationError(field, 'contains a NUL character, which PostgreSQL jsonb cannot store');
  }
  if (unstorable) {
    throw new ValidationError(field, 'contains a lone UTF-16 surrogate, which PostgreSQL jsonb cannot store');
  }
  return text;
}

/**
 * How deep a payload, result or detail may nest. JSON.stringify's own limit depends on the calling
 * thread's stack (about 4,000 levels on Node's main thread, four times that in a worker thread) and
 * PostgreSQL's jsonb parser on max_stack_depth (about 11,000 levels at the default 2 MB): a fixed
 * bound well below both gives one answer everywhere, and a ValidationError rather than a server error.
 */
export const MAX_JSON_DEPTH = 2000;

// Whether JSON text nests arrays and objects deeper than `max`; brackets inside strings do not count.
function jsonDepthOver(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      // A backslash escapes the next character: skip it.
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

// Why JSON.stringify refused, without its message: V8 names the property path of a cycle (payload
// keys), and a throwing toJSON may say anything.
function unserialisable(err: unknown): string {
  if (err instanceof RangeError) return 'nested too deeply';
  const message = err instanceof Error ? err.message : '';
  if (message.startsWith('Converting circular structure')) return 'it holds a circular reference';
  if (message.includes('BigInt')) return 'it holds a BigInt';
  return `${err instanceof Error ? err.name : typeof err} thrown while serialising`;
}

/** Resolves `runAt`/`delayMs` into a delay in milliseconds relative to database time (null: now). */
export function scheduleFromOptions(
  opts: { runAt?: Date | undefined; delayMs?: number | undefined },
  field: string,
): { runAt: Date | null; delayMs: number } {
  if (opts.runAt !== undefined && opts.delayMs !== undefined) {
    throw new ValidationError(field, 'give runAt or delayMs, not both');
  }
  if (opts.runAt !== undefined) {
    if (!(opts.runAt instanceof Date) || Number.isNaN(opts.runAt.getTime())) {
      throw new ValidationError(`${field}.runAt`, 'must be a valid Date');
    }
    return { runAt: opts.runAt, delayMs: 0 };
  }
  return { runAt: null, delayMs: optionalInt(opts.delayMs, `${field}.delayMs`, 0, MAX_ENQUEUE_DELAY_MS, 0) };
}

/** Reduces an error code to a short, safe token (letters, digits and _ - . :). */
export function sanitiseErrorCode(code: unknown, fallback: string): string {
  if (typeof code !== 'string' && typeof code !== 'number') return fallback;
  const cleaned = String(code).replace(ERROR_CODE, '_').slice(0, 64);
  return cleaned.length > 0 ? cleaned : fallback;
}

/** Truncates free text to `max` characters, marking the cut. */
export function bounded(text: unknown, max: number): string | null {
  if (text === undefined || text === null) return null;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is exactly what PostgreSQL text refuses.
  const s = String(text).replace(/\u0000/g, '');
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) {
    return String(value);
  }
  return typeof value;
}

/** Validates the `{ reason, actor? }` options an operator action (cancel, skip) takes. */
export function assertReasonAndActor(options: unknown): { reason: string; actor: string | null } {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('options', 'must be an object with at least a reason');
  }
  rejectUnknownOptions(options, ['reason', 'actor'], 'options');
  const { reason, actor } = options as { reason?: unknown; actor?: unknown };
  return { reason: assertText(reason, 'reason', 1000), actor: optionalText(actor, 'actor', 200) };
}

/** Priorities accepted by enqueue and schedules: from -PRIORITY_LIMIT to PRIORITY_LIMIT. */
export const PRIORITY_LIMIT = 1_000_000;
