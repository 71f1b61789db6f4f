/**
 * Every error Leasehold raises carries a stable `code`. Check errors with `isLeaseholdError(err, code)`
 * rather than `instanceof` alone: two copies of the package can be installed side by side.
 */

/** Stable error codes raised by Leasehold itself. */
export type LeaseholdErrorCode =
  | 'VALIDATION'
  | 'SCHEMA_VERSION'
  | 'DATABASE'
  | 'LEASE_LOST'
  | 'WORKER_STATE'
  | 'JOB_NOT_FOUND'
  | 'JOB_STATE';

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

/** A driver or server error, translated at the storage boundary; `cause` keeps the original. */
export class DatabaseError extends LeaseholdError {
  /** The PostgreSQL SQLSTATE, when the server sent one. */
  readonly sqlState: string | undefined;

  constructor(message: string, sqlState: string | undefined, cause: unknown) {
    super('DATABASE', message, { cause });
    this.name = 'DatabaseError';
    this.sqlState = sqlState;
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

/** True when `err` is a Leasehold error, optionally of the given code. Works across package copies. */
export function isLeaseholdError(err: unknown, code?: LeaseholdErrorCode): err is LeaseholdError {
  if (typeof err !== 'object' || err === null) return false;
  const candidate = err as { code?: unknown; name?: unknown };
  const known: readonly string[] = [
    'VALIDATION',
    'SCHEMA_VERSION',
    'DATABASE',
    'LEASE_LOST',
    'WORKER_STATE',
    'JOB_NOT_FOUND',
    'JOB_STATE',
  ];
  if (typeof candidate.code !== 'string' || !known.includes(candidate.code)) return false;
  return code === undefined || candidate.code === code;
}

const CHECK_VIOLATION = '23514';
// Migration 007's bound on a payload's stored size, which catches writers that bypass the client.
const PAYLOAD_SIZE_CONSTRAINT = 'jobs_payload_size';

/**
 * Wraps a thrown driver error in a `DatabaseError` without repeating parameter values
 * (they may hold payloads) in the message; a payload refused by the database's size constraint
 * becomes a `ValidationError`, like one refused by the client.
 */
export function toDatabaseError(err: unknown, statement: string): LeaseholdError {
  if (err instanceof LeaseholdError) return err;
  const pgErr = err as { code?: unknown; message?: unknown; constraint?: unknown };
  const sqlState = typeof pgErr.code === 'string' ? pgErr.code : undefined;
  if (sqlState === CHECK_VIOLATION && pgErr.constraint === PAYLOAD_SIZE_CONSTRAINT) {
    // The same class as the client's own size check. The driver error is not kept as the cause:
    // its detail quotes the start of the refused row, payload included.
    return new ValidationError(
      'payload',
      `is over the database's limit (constraint ${PAYLOAD_SIZE_CONSTRAINT}); nothing was written`,
    );
  }
  const reason = typeof pgErr.message === 'string' ? pgErr.message : String(err);
  return new DatabaseError(`${statement} failed: ${reason}`, sqlState, err);
}
