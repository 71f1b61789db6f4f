import { toDatabaseError } from '../../shared/errors.js';
import { defineStatement, type Queryable, run } from '../db.js';

// Job search for the dashboard (and bulk actions): every job Leasehold keeps, in three sources,
// newest first, keyset-paged on id. `jobs` holds live work (finished_at null: pending, blocked,
// running) and terminal jobs (finished_at set: dead, cancelled); `finished_jobs` holds retained
// succeeded jobs. Each filter is one entry of FILTERS: the sources it can match in, its predicate
// over the row alias `x`, and the index that serves it (docs/dashboard.md shows the plans). The
// statement text is put together from these constant fragments only; every value is a $n parameter.
// Statements are sent unnamed, so each is planned for its values (a generic plan could not tell a
// rare queue from a large one).

/** Where a job lives: live work, terminal jobs (both in `jobs`), retained succeeded jobs. */
export type SearchSource = 'live' | 'terminal' | 'succeeded';

/**
 * The statuses search tells apart; `blocked` is a pending job that may not run yet: waiting behind
 * its ordering key's head, or a flow child waiting for its parents.
 */
export type SearchStatus = 'pending' | 'blocked' | 'running' | 'dead' | 'cancelled' | 'succeeded';

/** Every status, in the order the dashboard lists them. */
export const SEARCH_STATUSES: readonly SearchStatus[] = [
  'pending',
  'blocked',
  'running',
  'dead',
  'cancelled',
  'succeeded',
];

// Per status: its source and its predicate in that source. The predicates repeat the partial
// indexes' own (jobs_claimable_idx, jobs_ordering_waiting_idx, jobs_flow_waiting_idx (017),
// jobs_expired_lease_idx, jobs_dead_queue_idx), so the planner may use them: `blocked` is written
// as one arm per index, so each arm implies its index's predicate (a BitmapOr of the two).
const STATUS: Record<SearchStatus, { source: SearchSource; predicate: string }> = {
  pending: {
    source: 'live',
    predicate: `(x.status = 'pending' AND NOT x.awaits_predecessor AND x.waiting_parents = 0)`,
  },
  blocked: {
    source: 'live',
    predicate: `((x.status = 'pending' AND x.awaits_predecessor) OR (x.status = 'pending' AND x.waiting_parents > 0))`,
  },
  running: { source: 'live', predicate: `x.status = 'running'` },
  dead: { source: 'terminal', predicate: `x.status = 'dead'` },
  cancelled: { source: 'terminal', predicate: `x.status = 'cancelled'` },
  succeeded: { source: 'succeeded', predicate: 'true' },
};

/** How a filter's value is given and checked. */
export type FilterKind = 'id' | 'queue' | 'text' | 'time';

/** One search filter: how its value is checked, where it can match, and its SQL. */
export interface SearchFilter {
  /** The criterion's name (the query parameter and form field). */
  readonly name: string;
  readonly kind: FilterKind;
  /** The sources the filter can match in: a set filter leaves the others out. */
  readonly sources: readonly SearchSource[];
  /** The predicate over `x`, given the parameter placeholder. */
  readonly predicate: (param: string) => string;
  /** What serves it at scale (documentation; docs/dashboard.md shows the plans). */
  readonly servedBy: string;
}

const ALL: readonly SearchSource[] = ['live', 'terminal', 'succeeded'];
const JOBS: readonly SearchSource[] = ['live', 'terminal'];
const ENDED: readonly SearchSource[] = ['terminal', 'succeeded'];

/**
 * The filters, one entry each. To add one: a column or table that identifies
 * the jobs, an index serving the predicate (partial where it can be), and an entry here; the
 * operation validates it by `kind` and the dashboard draws its control from this list.
 */
export const FILTERS: readonly SearchFilter[] = [
  { name: 'id', kind: 'id', sources: ALL, predicate: (p) => `x.id = ${p}::bigint`, servedBy: 'primary keys' },
  {
    name: 'queue',
    kind: 'queue',
    sources: ALL,
    predicate: (p) => `x.queue_name = ${p}`,
    servedBy:
      'jobs_claimable_idx, jobs_ordering_waiting_idx, jobs_terminal_queue_idx, finished_jobs_queue_idx (017)',
  },
  {
    name: 'orderingKey',
    kind: 'text',
    // finished_jobs keeps no ordering key: a succeeded job has left its key's line.
    sources: JOBS,
    predicate: (p) => `x.ordering_key = ${p}`,
    servedBy: 'jobs_ordering_key_idx (017)',
  },
  {
    name: 'idempotencyKey',
    kind: 'text',
    sources: ALL,
    predicate: (p) => `x.id IN (SELECT k.job_id FROM "$schema".job_keys AS k WHERE k.idempotency_key = ${p})`,
    servedBy: 'job_keys_key_idx (017), then the primary keys',
  },
  {
    name: 'errorCode',
    kind: 'text',
    // The code a job died or was cancelled with (a retrying job's last code is not searched).
    sources: ['terminal'],
    predicate: (p) => `x.last_error_code = ${p}`,
    servedBy: 'jobs_terminal_error_idx (017)',
  },
  {
    name: 'schedule',
    // Checked as schedule names are (the same rule as queue names).
    kind: 'queue',
    // The jobs a cron schedule's ticks made (schedule_ticks keeps one row per tick, with its job).
    sources: ALL,
    predicate: (p) =>
      `x.id IN (SELECT t.job_id FROM "$schema".schedule_ticks AS t WHERE t.schedule_name = ${p})`,
    servedBy: 'schedule_ticks_name_job_idx (017), then the primary keys',
  },
  {
    name: 'flow',
    kind: 'id',
    // The jobs of one flow (one enqueueFlow call), while its nodes are kept.
    sources: ALL,
    predicate: (p) =>
      `x.id IN (SELECT n.job_id FROM "$schema".flow_nodes AS n WHERE n.flow_id = ${p}::bigint)`,
    servedBy: 'flow_nodes_flow_id_ref_key (014), then the primary keys',
  },
  {
    name: 'createdFrom',
    kind: 'time',
    sources: ALL,
    predicate: (p) => `x.created_at >= ${p}::timestamptz`,
    servedBy: 'primary keys, newest first (ids grow with creation time)',
  },
  {
    name: 'createdTo',
    kind: 'time',
    sources: ALL,
    predicate: (p) => `x.created_at < ${p}::timestamptz`,
    servedBy: 'primary keys, newest first, with another filter',
  },
  {
    name: 'finishedFrom',
    kind: 'time',
    sources: ENDED,
    predicate: (p) => `x.finished_at >= ${p}::timestamptz`,
    servedBy: 'jobs_terminal_finished_idx, finished_jobs_finished_at_idx',
  },
  {
    name: 'finishedTo',
    kind: 'time',
    sources: ENDED,
    predicate: (p) => `x.finished_at < ${p}::timestamptz`,
    servedBy: 'jobs_terminal_finished_idx, finished_jobs_finished_at_idx',
  },
];

/** Checked search criteria: filter values by name, and the statuses to match (null: all). */
export interface SearchCriteria {
  values: Readonly<Record<string, string>>;
  statuses: readonly SearchStatus[] | null;
  /** Payload search: only with a queue that opted in, over its newest `scanRows` jobs. */
  payload: { text: string; chars: number; scanRows: number } | null;
}

/** A job as search lists it: what it is and where it stands, never its payload. */
export interface SearchRow {
  id: string;
  queue_name: string;
  status: SearchStatus;
  priority: number;
  attempt_count: number;
  max_attempts: number;
  ordering_key: string | null;
  last_error_code: string | null;
  created_at: Date;
  available_at: Date | null;
  finished_at: Date | null;
}

const JOB_COLUMNS = `x.id::text AS id, x.id AS sort_id, x.queue_name,
    CASE WHEN x.status = 'pending' AND (x.awaits_predecessor OR x.waiting_parents > 0) THEN 'blocked'
         ELSE x.status::text END AS status,
    x.priority, x.attempt_count, x.max_attempts, x.ordering_key, x.last_error_code, x.created_at,
    x.available_at, x.finished_at`;
const FINISHED_COLUMNS = `x.id::text AS id, x.id AS sort_id, x.queue_name, 'succeeded' AS status,
    x.priority, x.attempt_count, x.max_attempts, NULL::text AS ordering_key, NULL::text AS last_error_code,
    x.created_at, NULL::timestamptz AS available_at, x.finished_at`;

type Mode =
  | { kind: 'page'; before: string | null; limit: number }
  | { kind: 'ids'; after: string; limit: number }
  | { kind: 'count'; cap: number };

/** The statement for `criteria` in `mode`: text built from constant fragments, values as $n. */
export function searchStatement(
  schema: string,
  criteria: SearchCriteria,
  mode: Mode,
): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const param = (value: unknown) => {
    values.push(value);
    return `$${values.length}`;
  };
  let sources = new Set<SearchSource>(ALL);
  const predicates: string[] = [];
  for (const filter of FILTERS) {
    const value = criteria.values[filter.name];
    if (value === undefined) continue;
    sources = new Set(filter.sources.filter((s) => sources.has(s)));
    predicates.push(filter.predicate(param(value)).replaceAll('"$schema"', schema));
  }
  const statuses = criteria.statuses ?? SEARCH_STATUSES;
  sources = new Set([...sources].filter((s) => statuses.some((st) => STATUS[st].source === s)));
  if (criteria.payload) sources.delete('succeeded'); // finished_jobs keeps no payload
  const branches: string[] = [];
  const jobSources = JOBS.filter((s) => sources.has(s));
  if (jobSources.length > 0) {
    const where = [...predicates];
    if (jobSources.length === 1) {
      where.push(jobSources[0] === 'live' ? 'x.finished_at IS NULL' : 'x.finished_at IS NOT NULL');
    }
    const jobStatuses = statuses.filter(
      (st) => STATUS[st].source !== 'succeeded' && sources.has(STATUS[st].source),
    );
    const everyStatusOf = SEARCH_STATUSES.filter((st) => jobSources.includes(STATUS[st].source));
    if (jobStatuses.length < everyStatusOf.length) {
      where.push(`(${jobStatuses.map((st) => STATUS[st].predicate).join(' OR ')})`);
    }
    let from = `${schema}.jobs AS x`;
    if (criteria.payload) {
      // Bounded: the newest scanRows jobs of the queue (below the page's cursor), then the prefix.
      const bound =
        mode.kind === 'page' && mode.before !== null ? `AND p.id < ${param(mode.before)}::bigint` : '';
      from = `(SELECT * FROM ${schema}.jobs AS p WHERE p.queue_name = ${param(criteria.values.queue)} ${bound}
        ORDER BY p.id DESC LIMIT ${param(criteria.payload.scanRows)}) AS x`;
      where.push(
        `strpos(lower(left(x.payload::text, ${param(criteria.payload.chars)})), lower(${param(criteria.payload.text)})) > 0`,
      );
    }
    branches.push(branch(`SELECT ${JOB_COLUMNS} FROM ${from}`, where));
  }
  if (sources.has('succeeded')) {
    branches.push(branch(`SELECT ${FINISHED_COLUMNS} FROM ${schema}.finished_jobs AS x`, predicates));
  }
  if (branches.length === 0) return { text: 'SELECT NULL WHERE false', values: [] };

  function branch(select: string, where: string[]): string {
    const all = [...where];
    if (mode.kind === 'page') {
      if (mode.before !== null) all.push(`x.id < ${param(mode.before)}::bigint`);
      return `(${select} WHERE ${all.join(' AND ') || 'true'} ORDER BY x.id DESC LIMIT ${param(mode.limit)})`;
    }
    if (mode.kind === 'ids') {
      all.push(`x.id > ${param(mode.after)}::bigint`);
      return `(${select} WHERE ${all.join(' AND ')} ORDER BY x.id LIMIT ${param(mode.limit)})`;
    }
    return `(SELECT count(*) AS n FROM (${select} WHERE ${all.join(' AND ') || 'true'} LIMIT ${param(mode.cap)}) AS c)`;
  }

  const name = `/* leasehold_search_${mode.kind} */ `;
  if (mode.kind === 'count') {
    return { text: `${name}SELECT least(${branches.join(' + ')}, ${param(mode.cap)})::int AS n`, values };
  }
  const order = mode.kind === 'page' ? 'DESC' : 'ASC';
  return {
    text: `${name}SELECT * FROM (${branches.join('\n  UNION ALL\n  ')}) AS found ORDER BY sort_id ${order} LIMIT ${param(mode.limit)}`,
    values,
  };
}

async function query<R>(db: Queryable, statement: { text: string; values: unknown[] }): Promise<R[]> {
  try {
    return (await db.query(statement)).rows as R[];
  } catch (err) {
    throw toDatabaseError(err, 'leasehold_search', 'search');
  }
}

/** One page of jobs matching `criteria`, newest first, below id `before` (null: from the newest). */
export function searchJobs(
  db: Queryable,
  schema: string,
  criteria: SearchCriteria,
  before: string | null,
  limit: number,
): Promise<SearchRow[]> {
  return query<SearchRow>(db, searchStatement(schema, criteria, { kind: 'page', before, limit }));
}

/** How many jobs match `criteria`, counted up to `cap`. */
export async function countJobs(
  db: Queryable,
  schema: string,
  criteria: SearchCriteria,
  cap: number,
): Promise<number> {
  const rows = await query<{ n: number }>(db, searchStatement(schema, criteria, { kind: 'count', cap }));
  return rows[0]?.n ?? 0;
}

/** The ids (and statuses) of the next `limit` matching jobs above id `after`, oldest first. */
export function matchingIds(
  db: Queryable,
  schema: string,
  criteria: SearchCriteria,
  after: string,
  limit: number,
): Promise<{ id: string; status: SearchStatus }[]> {
  return query(db, searchStatement(schema, criteria, { kind: 'ids', after, limit }));
}

/**
 * QueuePayloadSearch: a queue's payload-search setting (characters of the payload's JSON text
 * searched; null: off). Primary-key read of queues.
 */
const QueuePayloadSearch = defineStatement(
  'queue_payload_search',
  (s) => `SELECT payload_search_chars FROM ${s}.queues WHERE name = $1`,
);

/** The number of payload characters a queue lets search read (null: payload search is off). */
export async function payloadSearchChars(
  db: Queryable,
  schema: string,
  queue: string,
): Promise<number | null> {
  const rows = await run<{ payload_search_chars: number | null }>(db, QueuePayloadSearch(schema), [queue]);
  return rows[0]?.payload_search_chars ?? null;
}

/**
 * QueuePayloadSearchSet: turns payload search on for queue $1 (the first $2 characters) or off
 * ($2 null); creates the queue's settings row if it has none. Takes the queues row lock.
 */
const QueuePayloadSearchSet = defineStatement(
  'queue_payload_search_set',
  (s) => `
  INSERT INTO ${s}.queues AS q (name, payload_search_chars) VALUES ($1, $2)
  ON CONFLICT (name) DO UPDATE SET payload_search_chars = excluded.payload_search_chars, updated_at = now()
  RETURNING payload_search_chars`,
);

/** Stores a queue's payload-search setting. */
export async function setPayloadSearchChars(
  db: Queryable,
  schema: string,
  queue: string,
  chars: number | null,
): Promise<void> {
  await run(db, QueuePayloadSearchSet(schema), [queue, chars]);
}
