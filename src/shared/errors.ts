/**
 * Every error Leasehold raises carries a stable `code`. Check errors with `isLeaseholdError(err, code)`
 * rather than `instanceof` alone: two copies of the package can be installed side by side.
 */

import { operationOf, STATEMENT_NAME } from './operation-names.js';

/** Stable error codes raised by Leasehold itself. */
export type LeaseholdErrorCode =
  | 'VALIDATION'
  | 'SCHEMA_VERSION'
  | 'DATABASE'
  | 'PERMISSION_DENIED'
  | 'LEASE_LOST'
  | 'WORKER_STATE'
  | 'JOB_NOT_FOUND'
  | 'JOB_STATE'
  | 'EMBEDDED_POSTGRES'
  | 'JOB_DEAD'
  | 'JOB_CANCELLED'
  | 'WAIT_TIMEOUT'
  | 'WAIT_ABORTED'
  | 'CLIENT_CLOSED'
  | 'QUEUE_NOT_FOUND'
  | 'CANCELLED'
  | 'SHUTDOWN';

/** Base class of every error Leasehold raises. */
export class LeaseholdError extends Error {
  /** Stable machine-readable code; never changes between versions. */
  readonly code: LeaseholdErrorCode;

  constructor(code: LeaseholdErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LeaseholdError';
    this.code = code;
  }
}

/** Bad input (a queue name, payload, option or limit) refused before anything was written. */
export class ValidationError extends LeaseholdError {
  /** The option or argument that was refused, e.g. `queue` or `payload`. */
  readonly field: string;

  constructor(field: string, message: string) {
    super('VALIDATION', `${field}: ${message}`);
    this.name = 'ValidationError';
    this.field = field;
  }
}

/** The database schema was migrated by a newer Leasehold than this one. */
export class SchemaVersionError extends LeaseholdError {
  constructor(message: string) {
    super('SCHEMA_VERSION', message);
    this.name = 'SchemaVersionError';
  }
}

/** Where a `DatabaseError` came from, beyond its message: for debugging, never for matching on. */
export interface DatabaseErrorDetails {
  /** The internal statement that failed (e.g. `leasehold_enqueue_one_3ab6a29fdd`); not a contract. */
  readonly statement?: string | undefined;
  /** The driver's or the socket's error code (`ECONNREFUSED`, `ETIMEDOUT`), when it sent no SQLSTATE. */
  readonly errno?: string | undefined;
}

/** A driver or server error, translated at the storage boundary; `cause` keeps the original. */
export class DatabaseError extends LeaseholdError {
  /** The PostgreSQL SQLSTATE (five characters, e.g. `40001`), when the server sent one; never a socket code. */
  readonly sqlState: string | undefined;
  /** The driver's or the socket's error code (`ECONNREFUSED`) when the failure never reached a server. */
  readonly errno: string | undefined;
  /** The internal statement that failed, for debugging; messages name the public call instead. */
  readonly statement: string | undefined;

  constructor(
    message: string,
    sqlState: string | undefined,
    cause: unknown,
    code: Extract<LeaseholdErrorCode, 'DATABASE' | 'PERMISSION_DENIED'> = 'DATABASE',
    details: DatabaseErrorDetails = {},
  ) {
    super(code, message, { cause });
    this.name = 'DatabaseError';
    this.sqlState = sqlState;
    this.errno = details.errno;
    this.statement = details.statement;
  }
}

// SQLSTATE of "permission denied" and of a row-level security policy violation.
const INSUFFICIENT_PRIVILEGE = '42501';

// Which group role allows what, appended to permission errors so the fix is in the message.
const ROLES_HINT =
  'the connected role lacks a privilege this needs: <schema>_producer enqueues and <schema>_worker runs workers ' +
  '(both with viaFunctions: true), <schema>_admin runs operations (replay, cancel, skip, prune, queue settings) ' +
  'and the schema owner migrates; see "Database roles" in docs/operators-guide.md';

/**
 * The database refused a statement for lack of a privilege (SQLSTATE 42501): the connected role is
 * missing a grant, or a row-level policy of the Leasehold roles forbids the change. Nothing was
 * written. A `DatabaseError` too, with code `PERMISSION_DENIED`.
 */
export class PermissionError extends DatabaseError {
  constructor(message: string, cause: unknown, details: DatabaseErrorDetails = {}) {
    super(message, INSUFFICIENT_PRIVILEGE, cause, 'PERMISSION_DENIED', details);
    this.name = 'PermissionError';
  }
}

/** Raised inside a handler (e.g. by `job.effect`) when the job's lease is gone and nothing more may be written. */
export class LeaseLostError extends LeaseholdError {
  constructor(message = 'the lease on this job was lost; its writes are refused') {
    super('LEASE_LOST', message);
    this.name = 'LeaseLostError';
  }
}

/** An operation named a job that does not exist (never did, or was removed by retention). */
export class JobNotFoundError extends LeaseholdError {
  /** The job ids not found. */
  readonly jobIds: readonly string[];

  constructor(jobIds: readonly string[]) {
    super('JOB_NOT_FOUND', `no job ${jobIds.join(', ')}`);
    this.name = 'JobNotFoundError';
    this.jobIds = jobIds;
  }
}

/**
 * An operation refused because a job is not in a state it applies to (replaying a job that is not
 * dead, cancelling a finished one). Nothing was written.
 */
export class JobStateError extends LeaseholdError {
  /** The jobs refused, with the status each was found in. */
  readonly jobs: readonly { id: string; status: string }[];

  constructor(operation: string, expected: string, jobs: readonly { id: string; status: string }[]) {
    const listed = jobs
      .slice(0, 5)
      .map((job) => `${job.id} is ${job.status}`)
      .join(', ');
    const more = jobs.length > 5 ? ` and ${jobs.length - 5} more` : '';
    super('JOB_STATE', `cannot ${operation}: ${expected} (${listed}${more}); nothing was changed`);
    this.name = 'JobStateError';
    this.jobs = jobs;
  }
}

/**
 * `startEmbeddedPostgres` could not start its server (no binaries for this platform, a folder the
 * server's user cannot reach, initdb or the server refusing to start); the message says why and
 * what to do. Nothing is left running.
 */
export class EmbeddedPostgresError extends LeaseholdError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('EMBEDDED_POSTGRES', message, options);
    this.name = 'EmbeddedPostgresError';
  }
}

/** The last error summary of a job that ended without succeeding (never its payload or stack). */
export interface JobErrorSummary {
  /** The stored error code, e.g. `RETRYABLE`, `PAYLOAD_SCHEMA`, `CANCELLED`. */
  readonly code: string | null;
  /** The class of the error the handler threw, when known. */
  readonly class: string | null;
  /** The stored (bounded) error message. */
  readonly message: string | null;
}

/** `lh.waitFor`: the job went `dead` (attempts spent, or a permanent error); `lastError` says why. */
export class JobDeadError extends LeaseholdError {
  /** The job waited for. */
  readonly jobId: string;
  /** Its last error: code, class and message. */
  readonly lastError: JobErrorSummary;

  constructor(jobId: string, lastError: JobErrorSummary) {
    super('JOB_DEAD', `job ${jobId} is dead (${lastError.code ?? 'no error code'})`);
    this.name = 'JobDeadError';
    this.jobId = jobId;
    this.lastError = lastError;
  }
}

/** `lh.waitFor`: the job was cancelled by an operator; `lastError.message` holds the reason given. */
export class JobCancelledError extends LeaseholdError {
  /** The job waited for. */
  readonly jobId: string;
  /** Code `CANCELLED` and the cancel's reason. */
  readonly lastError: JobErrorSummary;

  constructor(jobId: string, lastError: JobErrorSummary) {
    super('JOB_CANCELLED', `job ${jobId} was cancelled`);
    this.name = 'JobCancelledError';
    this.jobId = jobId;
    this.lastError = lastError;
  }
}

/** `lh.waitFor`: `timeoutMs` passed before the job ended. The job itself is untouched. */
export class WaitTimeoutError extends LeaseholdError {
  /** The job waited for. */
  readonly jobId: string;

  constructor(jobId: string, timeoutMs: number) {
    super('WAIT_TIMEOUT', `job ${jobId} did not end within ${timeoutMs} ms; it was left as it is`);
    this.name = 'WaitTimeoutError';
    this.jobId = jobId;
  }
}

/**
 * `lh.waitFor`: the wait was given up before the job ended: its `signal` aborted (`cause` is the
 * signal's reason) or the client was closed. Named `AbortError`, as Node's own aborted calls are.
 * The job itself is untouched.
 */
export class WaitAbortedError extends LeaseholdError {
  /** The job waited for. */
  readonly jobId: string;

  constructor(jobId: string, why: string, options?: { cause?: unknown }) {
    super(
      'WAIT_ABORTED',
      `the wait for job ${jobId} was given up: ${why}; the job was left as it is`,
      options,
    );
    this.name = 'AbortError';
    this.jobId = jobId;
  }
}

/**
 * Every call on a client after `lh.close()` rejects with this (code `CLIENT_CLOSED`), instead of the
 * driver's "Cannot use a pool after calling end on the pool".
 */
export class ClientClosedError extends LeaseholdError {
  constructor(operation?: string) {
    super(
      'CLIENT_CLOSED',
      `${operation === undefined ? '' : `${operation}: `}this Leasehold client is closed`,
    );
    this.name = 'ClientClosedError';
  }
}

/**
 * An operator call named a queue that is not known (no job was ever enqueued to it, it was never
 * configured, no schedule names it): a typo, most likely. Nothing was changed. `closest` holds the
 * known queues nearest by spelling.
 */
export class QueueNotFoundError extends LeaseholdError {
  /** The queue name given. */
  readonly queue: string;
  /** Known queues spelt nearest to it (at most three), nearest first; empty when none is near. */
  readonly closest: readonly string[];

  constructor(queue: string, closest: readonly string[]) {
    const hint = closest.length === 0 ? '' : ` (did you mean ${closest.map((q) => `"${q}"`).join(' or ')}?)`;
    super('QUEUE_NOT_FOUND', `no queue "${queue}"${hint}`);
    this.name = 'QueueNotFoundError';
    this.queue = queue;
    this.closest = closest;
  }
}

/** The class each code is raised with: what `isLeaseholdError(err, code)` narrows to. */
export interface LeaseholdErrorByCode {
  VALIDATION: ValidationError;
  SCHEMA_VERSION: SchemaVersionError;
  DATABASE: DatabaseError;
  PERMISSION_DENIED: PermissionError;
  LEASE_LOST: LeaseLostError;
  WORKER_STATE: LeaseholdError;
  JOB_NOT_FOUND: JobNotFoundError;
  JOB_STATE: JobStateError;
  EMBEDDED_POSTGRES: EmbeddedPostgresError;
  JOB_DEAD: JobDeadError;
  JOB_CANCELLED: JobCancelledError;
  WAIT_TIMEOUT: WaitTimeoutError;
  WAIT_ABORTED: WaitAbortedError;
  CLIENT_CLOSED: ClientClosedError;
  QUEUE_NOT_FOUND: QueueNotFoundError;
  CANCELLED: LeaseholdError;
  SHUTDOWN: LeaseholdError;
}

/** Every code, once: `isLeaseholdError` accepts only these (an object with another `code` is not ours). */
export const KNOWN_CODES: Readonly<Record<LeaseholdErrorCode, true>> = {
  VALIDATION: true,
  SCHEMA_VERSION: true,
  DATABASE: true,
  PERMISSION_DENIED: true,
  LEASE_LOST: true,
  WORKER_STATE: true,
  JOB_NOT_FOUND: true,
  JOB_STATE: true,
  EMBEDDED_POSTGRES: true,
  JOB_DEAD: true,
  JOB_CANCELLED: true,
  WAIT_TIMEOUT: true,
  WAIT_ABORTED: true,
  CLIENT_CLOSED: true,
  QUEUE_NOT_FOUND: true,
  CANCELLED: true,
  SHUTDOWN: true,
};

/**
 * True when `err` is a Leasehold error, optionally of the given code, and then typed as that code's
 * class (`isLeaseholdError(e, 'VALIDATION')` gives `e.field`). Works across package copies.
 */
export function isLeaseholdError<C extends LeaseholdErrorCode>(
  err: unknown,
  code: C,
): err is LeaseholdErrorByCode[C];
export function isLeaseholdError(err: unknown, code?: LeaseholdErrorCode): err is LeaseholdError;
export function isLeaseholdError(err: unknown, code?: LeaseholdErrorCode): err is LeaseholdError {
  if (typeof err !== 'object' || err === null) return false;
  const candidate = err as { code?: unknown };
  if (typeof candidate.code !== 'string' || !Object.hasOwn(KNOWN_CODES, candidate.code)) return false;
  return code === undefined || candidate.code === code;
}

const CHECK_VIOLATION = '23514';
// Migration 007's bound on a payload's stored size, which catches writers that bypass the client.
const PAYLOAD_SIZE_CONSTRAINT = 'jobs_payload_size';

// A SQLSTATE is five digits or capital letters; a Node socket error's code (ECONNREFUSED) is not one.
const SQLSTATE = /^[0-9A-Z]{5}$/;
// What pg-pool says to a query on a pool that was ended (by `lh.close()`, or by its owner).
const POOL_ENDED = 'Cannot use a pool after calling end on the pool';
/**
 * Wraps a thrown driver error in a `DatabaseError` (a `PermissionError` for a missing privilege)
 * without repeating parameter values (they may hold payloads) in the message; a payload refused by
 * the database's size constraint becomes a `ValidationError`, like one refused by the client, and a
 * pool that was ended a `ClientClosedError`. The message names the public call (`operation`, by
 * default the one `statement` serves); the statement itself is kept in the error's `statement`.
 */
export function toDatabaseError(
  err: unknown,
  statement: string,
  operation = operationOf(statement),
): LeaseholdError {
  if (err instanceof LeaseholdError) return err;
  const pgErr = err as { code?: unknown; message?: unknown; constraint?: unknown };
  const rawCode = typeof pgErr.code === 'string' ? pgErr.code : undefined;
  const sqlState = rawCode !== undefined && SQLSTATE.test(rawCode) ? rawCode : undefined;
  const errno = rawCode !== undefined && sqlState === undefined ? rawCode : undefined;
  if (sqlState === CHECK_VIOLATION && pgErr.constraint === PAYLOAD_SIZE_CONSTRAINT) {
    // The same class as the client's own size check. The driver error is not kept as the cause:
    // its detail quotes the start of the refused row, payload included.
    return new ValidationError(
      'payload',
      `is over the database's limit (constraint ${PAYLOAD_SIZE_CONSTRAINT}); nothing was written`,
    );
  }
  const reason = typeof pgErr.message === 'string' ? pgErr.message : String(err);
  if (reason === POOL_ENDED) return new ClientClosedError(operation);
  const details = { statement: STATEMENT_NAME.test(statement) ? statement : undefined, errno };
  if (sqlState === INSUFFICIENT_PRIVILEGE) {
    // The server's text names the table (or schema, or policy's table), never row values.
    return new PermissionError(`${operation} failed: ${reason}; ${ROLES_HINT}`, err, details);
  }
  return new DatabaseError(`${operation} failed: ${reason}`, sqlState, err, 'DATABASE', details);
}

/**
 * The same error, its message naming the public call `operation` made (a client method knows its
 * own name better than the statement it ran). Only errors of `toDatabaseError` are renamed.
 */
export function inOperation(err: unknown, operation: string): unknown {
  if (err instanceof ClientClosedError) return new ClientClosedError(operation);
  if (!(err instanceof DatabaseError) || err.statement === undefined) return err;
  const named = operationOf(err.statement);
  const prefix = `${named} failed: `;
  if (named === operation || !err.message.startsWith(prefix)) return err;
  const message = `${operation} failed: ${err.message.slice(prefix.length)}`;
  if (err.stack !== undefined) err.stack = err.stack.replace(err.message, message);
  err.message = message;
  return err;
}
