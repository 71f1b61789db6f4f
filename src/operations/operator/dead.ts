import type { LeaseholdContext } from '../../context/context.js';
import { ValidationError } from '../../shared/errors.js';
import {
  assertQueueName,
  MAX_BATCH,
  optionalDate,
  optionalInt,
  optionalText,
  rejectUnknownOptions,
} from '../../shared/validation.js';
import { type DeadCursor, listDeadJobs } from '../../storage/operator/dead.js';

/** Options of `listDead`. */
export interface ListDeadOptions {
  /** Only this queue's dead jobs. */
  queue?: string;
  /** Only those that died with this error code. */
  errorCode?: string;
  /** Only those that died before this time. */
  before?: Date;
  /** Page size (1..1000, default 50). */
  limit?: number;
  /** The `cursor` of the previous page. */
  cursor?: string;
}

/** A dead job as listed: what it is and why it died, never its payload. */
export interface DeadJobSummary {
  id: string;
  queueName: string;
  priority: number;
  attemptCount: number;
  maxAttempts: number;
  /**
   * The attempts its last failure allowed: `maxAttempts`, or fewer for an unclassified error (the
   * queue's `unknownErrorAttempts`) or under a queue's cap. Null when not recorded (a lease that
   * expired on its last attempt, or a death recorded before this version).
   */
  attemptBudget: number | null;
  errorCode: string | null;
  errorClass: string | null;
  errorMessage: string | null;
  createdAt: Date;
  /** When it went dead. */
  diedAt: Date;
}

/** One page of dead jobs, newest death first. */
export interface DeadJobPage {
  jobs: DeadJobSummary[];
  /** Pass as `cursor` for the next page; null when this page is the last. */
  cursor: string | null;
}

const KNOWN = ['queue', 'errorCode', 'before', 'limit', 'cursor'];

/** Validates the options and reads one page. */
export async function listDead(context: LeaseholdContext, options: ListDeadOptions): Promise<DeadJobPage> {
  const { pool: db, schema } = context;
  if (typeof options !== 'object' || options === null)
    throw new ValidationError('options', 'must be an object');
  rejectUnknownOptions(options, KNOWN, 'options');
  if (options.queue !== undefined) assertQueueName(options.queue);
  const limit = optionalInt(options.limit, 'limit', 1, MAX_BATCH, 50);
  const rows = await listDeadJobs(db, schema, {
    queue: options.queue ?? null,
    errorCode: optionalText(options.errorCode, 'errorCode', 64),
    before: optionalDate(options.before, 'before'),
    after: options.cursor === undefined ? null : decodeCursor(options.cursor),
    limit,
  });
  const last = rows.at(-1);
  return {
    jobs: rows.map((row) => ({
      id: row.id,
      queueName: row.queue_name,
      priority: row.priority,
      attemptCount: row.attempt_count,
      maxAttempts: row.max_attempts,
      attemptBudget: row.attempt_budget,
      errorCode: row.last_error_code,
      errorClass: row.last_error_class,
      errorMessage: row.last_error_message,
      createdAt: row.created_at,
      diedAt: row.finished_at,
    })),
    cursor: rows.length === limit && last ? encodeCursor({ at: last.cursor_at, id: last.id }) : null,
  };
}

// Opaque to callers; base64url of "<exact ISO time>|<id>".
function encodeCursor(cursor: DeadCursor): string {
  return Buffer.from(`${cursor.at}|${cursor.id}`, 'utf8').toString('base64url');
}

function decodeCursor(text: unknown): DeadCursor {
  const invalid = new ValidationError('cursor', 'is not a cursor returned by listDead');
  if (typeof text !== 'string' || text.length > 200) throw invalid;
  const [at, id, extra] = Buffer.from(text, 'base64url').toString('utf8').split('|');
  if (
    extra !== undefined ||
    !at ||
    !id ||
    !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(at) ||
    !/^\d{1,19}$/.test(id)
  ) {
    throw invalid;
  }
  return { at, id };
}
