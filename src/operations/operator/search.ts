import { ValidationError } from '../../shared/errors.js';
import {
  assertJobId,
  assertQueueName,
  assertText,
  MAX_BATCH,
  optionalInt,
  rejectUnknownOptions,
} from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import {
  countJobs,
  FILTERS,
  payloadSearchChars,
  SEARCH_STATUSES,
  type SearchCriteria,
  type SearchStatus,
  searchJobs,
  setPayloadSearchChars,
} from '../../storage/operator/search.js';

/**
 * What to find: each criterion narrows the result. Times are `Date`s or ISO 8601 strings; the
 * others strings. Statuses: pending, blocked (waiting behind its ordering key, or a flow child
 * waiting for its parents), running, dead,
 * cancelled, succeeded (retained finished jobs).
 */
export interface JobSearch {
  id?: string;
  queue?: string;
  /** A typed task's name: its queue (the same criterion as `queue`). */
  task?: string;
  status?: SearchStatus;
  orderingKey?: string;
  idempotencyKey?: string;
  /** The error code a dead or cancelled job ended with. */
  errorCode?: string;
  /** A cron schedule's name: the jobs its ticks made. */
  schedule?: string;
  /** A flow's id (`enqueueFlow`'s `flowId`): the jobs of that flow. */
  flow?: string;
  createdFrom?: Date | string;
  createdTo?: Date | string;
  finishedFrom?: Date | string;
  finishedTo?: Date | string;
  /** Text searched in the payloads of `queue`, only if that queue opted in (`setPayloadSearch`). */
  payload?: string;
}

/** Options of `searchJobs`. */
export interface SearchOptions {
  /** Page size (1..1000, default 50). */
  limit?: number;
  /** The `cursor` of the previous page. */
  cursor?: string;
}

/** A job as search lists it (never its payload). */
export interface JobSearchHit {
  id: string;
  queueName: string;
  status: SearchStatus;
  priority: number;
  attemptCount: number;
  maxAttempts: number;
  orderingKey: string | null;
  errorCode: string | null;
  createdAt: Date;
  availableAt: Date | null;
  finishedAt: Date | null;
}

/** One page of search results, newest first. */
export interface JobSearchPage {
  jobs: JobSearchHit[];
  /** Pass as `cursor` for the next page; null when this page is the last. */
  cursor: string | null;
}

/** Rows a payload search examines per page: the queue's newest jobs below the cursor. */
export const PAYLOAD_SCAN_ROWS = 10_000;
/** Longest payload prefix a queue may open to search, in characters. */
export const MAX_PAYLOAD_SEARCH_CHARS = 4_096;

const CRITERIA = ['task', 'status', 'payload', ...FILTERS.map((f) => f.name)];

/** Checks a search (unknown names, each value by its filter's kind) into storage criteria. */
export async function searchCriteria(
  db: Queryable,
  schema: string,
  search: JobSearch,
): Promise<SearchCriteria> {
  if (typeof search !== 'object' || search === null) throw new ValidationError('search', 'must be an object');
  rejectUnknownOptions(search, CRITERIA, 'search');
  const given = search as Record<string, unknown>;
  const values: Record<string, string> = {};
  for (const filter of FILTERS) {
    const value = given[filter.name];
    if (value === undefined || value === '') continue;
    values[filter.name] = checked(filter.kind, value, filter.name);
  }
  if (given.task !== undefined && given.task !== '') {
    assertQueueName(given.task, 'task');
    if (values.queue !== undefined && values.queue !== given.task) {
      throw new ValidationError('task', `names queue ${given.task}, but queue ${values.queue} was given too`);
    }
    values.queue = given.task;
  }
  let statuses: SearchStatus[] | null = null;
  if (given.status !== undefined && given.status !== '') {
    if (!SEARCH_STATUSES.includes(given.status as SearchStatus)) {
      throw new ValidationError('status', `must be one of ${SEARCH_STATUSES.join(', ')}`);
    }
    statuses = [given.status as SearchStatus];
  }
  let payload: SearchCriteria['payload'] = null;
  if (given.payload !== undefined && given.payload !== '') {
    const text = assertText(given.payload, 'payload', 200);
    if (values.queue === undefined) {
      throw new ValidationError('payload', 'payload search needs a queue (one that opted in)');
    }
    const chars = await payloadSearchChars(db, schema, values.queue);
    if (chars === null) {
      throw new ValidationError('payload', `queue ${values.queue} has not opted in to payload search`);
    }
    payload = { text, chars, scanRows: PAYLOAD_SCAN_ROWS };
  }
  return { values, statuses, payload };
}

function checked(kind: string, value: unknown, field: string): string {
  if (kind === 'id') return assertJobId(value, field);
  if (kind === 'queue') {
    assertQueueName(value, field);
    return value;
  }
  if (kind === 'time') {
    const date = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : null;
    if (date === null || Number.isNaN(date.getTime())) {
      throw new ValidationError(field, 'must be a Date or an ISO 8601 time');
    }
    return date.toISOString();
  }
  return assertText(value, field, 200);
}

/** Finds jobs in every state Leasehold keeps, newest first, keyset-paged. */
export async function searchJobsPage(
  db: Queryable,
  schema: string,
  search: JobSearch,
  options: SearchOptions = {},
): Promise<JobSearchPage> {
  rejectUnknownOptions(options, ['limit', 'cursor'], 'options');
  const limit = optionalInt(options.limit, 'limit', 1, MAX_BATCH, 50);
  const before = options.cursor === undefined || options.cursor === '' ? null : decodeCursor(options.cursor);
  const criteria = await searchCriteria(db, schema, search);
  const rows = await searchJobs(db, schema, criteria, before, limit);
  const last = rows.at(-1);
  return {
    jobs: rows.map((row) => ({
      id: row.id,
      queueName: row.queue_name,
      status: row.status,
      priority: row.priority,
      attemptCount: row.attempt_count,
      maxAttempts: row.max_attempts,
      orderingKey: row.ordering_key,
      errorCode: row.last_error_code,
      createdAt: row.created_at,
      availableAt: row.available_at,
      finishedAt: row.finished_at,
    })),
    cursor: rows.length === limit && last ? Buffer.from(`id:${last.id}`).toString('base64url') : null,
  };
}

/** How many jobs a search matches, counted exactly up to `cap`. */
export async function countSearch(
  db: Queryable,
  schema: string,
  search: JobSearch,
  cap: number,
): Promise<number> {
  return countJobs(db, schema, await searchCriteria(db, schema, search), cap);
}

function decodeCursor(text: unknown): string {
  const invalid = new ValidationError('cursor', 'is not a cursor returned by a search');
  if (typeof text !== 'string' || text.length > 40) throw invalid;
  const match = /^id:(\d{1,19})$/.exec(Buffer.from(text, 'base64url').toString('utf8'));
  if (!match) throw invalid;
  return match[1] as string;
}

/**
 * Opens a queue's payloads to search (the first `prefixChars` characters of each payload's JSON
 * text), or closes them again with `null`. Off by default: payloads may hold personal data.
 */
export async function setPayloadSearch(
  db: Queryable,
  schema: string,
  queue: string,
  prefixChars: number | null,
): Promise<void> {
  assertQueueName(queue);
  const chars =
    prefixChars === null ? null : optionalInt(prefixChars, 'prefixChars', 1, MAX_PAYLOAD_SEARCH_CHARS, 256);
  await setPayloadSearchChars(db, schema, queue, chars);
}

/** The search filters by name and kind, in order (for forms: the dashboard draws one control each). */
export const SEARCH_FILTERS: readonly { name: string; kind: string }[] = FILTERS.map((f) => ({
  name: f.name,
  kind: f.kind,
}));

/** Every status search tells apart. */
export { SEARCH_STATUSES };
