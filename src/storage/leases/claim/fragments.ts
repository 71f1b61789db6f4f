/**
 * The fragments every claim is made of (composed in ../claim.ts, the one place that chooses them):
 * which jobs are claimable, the window of candidates in preference order, the lease grant with its
 * fencing token, and what a claim returns of each job. The fragments of one kind of queue are
 * beside this file: per-key-limit.ts, throttle.ts, round-robin.ts.
 */

/** Preference order, jobs_claimable_idx's: the highest priority, then the longest due, then the oldest. */
export const PREFERENCE = 'priority DESC, available_at, id';

/**
 * The claimable predicate: a job of queue $1 that is pending, not waiting behind the head of its
 * ordering key (awaits_predecessor) nor for flow parents (waiting_parents), and due. These are
 * jobs_claimable_idx's own conditions, so every scan that states them is served by that index, and
 * jobs outside it (behind an ordering key, flow children) cost a claim nothing.
 */
export const CLAIMABLE: readonly string[] = [
  'queue_name = $1',
  "status = 'pending'",
  'NOT awaits_predecessor',
  'waiting_parents = 0',
  'available_at <= now()',
];

/**
 * `conditions` as a WHERE clause at `indent`, one line each; an entry starting with `--` is an SQL
 * comment line, said where the condition after it is.
 */
export function where(conditions: readonly string[], indent: string): string {
  const [first, ...rest] = conditions;
  const lines = rest.map((c) => (c.startsWith('--') ? `\n${indent}  ${c}` : `\n${indent}  AND ${c}`));
  return `${indent}WHERE ${first}${lines.join('')}`;
}

/**
 * The plain claim's gate: nothing for a paused queue, nor for a queue with a limit (its claims go
 * through the per-key limit's or the throttle's fragments; a worker whose cached settings are stale
 * claims nothing, re-reads them and claims again). The NOT EXISTS depends only on $1, so PostgreSQL
 * evaluates it once per statement (a primary-key probe of queues) before touching jobs.
 */
export const plainQueueGate = (s: string) => `NOT EXISTS (
        SELECT 1 FROM ${s}.queues
        WHERE name = $1
          AND (paused OR concurrency_limit_per_key IS NOT NULL OR rate_limit_max IS NOT NULL
               OR concurrency_limit IS NOT NULL))`;

/** What a window of candidates selects, from which claimable jobs, and how many. */
export interface CandidateWindow {
  /** The columns the later fragments read (the id always; the lane for a routed lease grant). */
  readonly columns: string;
  /** CLAIMABLE, with the claim's own gates (its floor, its queue's settings). */
  readonly conditions: readonly string[];
  /** How many rows to lock: the claim's size, or a wider window a limit chooses from. */
  readonly limit: string;
}

/**
 * `candidate` (or `name`): claimable jobs of queue $1 in preference order, locked FOR UPDATE SKIP
 * LOCKED, so that concurrent claimers pass each other instead of waiting (ORDER BY is then a
 * preference, not a promise: a claimer skips rows a peer holds). Served by jobs_claimable_idx.
 */
export function candidateWindow(s: string, window: CandidateWindow, name = 'candidate'): string {
  return `${name} AS (
    SELECT ${window.columns}
    FROM ${s}.jobs
${where(window.conditions, '    ')}
    ORDER BY ${PREFERENCE}
    LIMIT ${window.limit}
    FOR UPDATE SKIP LOCKED
  )`;
}

// A timestamptz column as epoch milliseconds in float8 (why this expression: CLAIMED_TIMES).
const epochMs = (column: string) => `round(date_part('epoch', ${column}) * 1000000) / 1000::float8`;

/**
 * The claim's two timestamps, as epoch milliseconds (float8). Parsed from timestamptz text, two
 * dates per claimed row were the largest single cost of the worker process after garbage
 * collection in a 50,000-job drain (a regular expression and a Date built from parts, per value).
 * Computed in float8, not with `extract(epoch ...)`: since PostgreSQL 14 that returns numeric, and
 * the numeric arithmetic and cast cost the server 0.65–0.73 µs per claimed row for the two columns,
 * against 0.23–0.24 this way (500,000 rows, PostgreSQL 18 and 15). The value is the same double:
 * `date_part` gives the seconds to within 0.2 µs, `round(... * 1e6)` recovers the exact
 * microsecond count (below 2^53, so a float8 holds it exactly), and one division makes the
 * correctly rounded milliseconds, as the numeric cast did; the two were equal on 6,000,000
 * timestamps on both servers, infinities and the range's ends included. Plain `date_part * 1000`
 * was not: it differed in the last bit for a quarter to a third of them, and for 40 in 3,000,000
 * by a whole millisecond once truncated to a Date.
 */
export const CLAIMED_TIMES = `${epochMs('j.lease_expires_at')} AS lease_expires_ms,
            ${epochMs('j.available_at')} AS available_ms`;

/**
 * Whether the run's completion has nothing to do beyond the fence and the lane move: no ordering
 * key to hand over, no key slot to give back, no flow children to release. Each is fixed before
 * the completion (an ordering key and children at enqueue, a key slot by this claim), so the
 * worker chooses the plain completion from it (complete.ts), which checks it again.
 */
export const CLAIMED_PLAIN =
  '(j.ordering_key IS NULL AND NOT j.holds_key_slot AND NOT j.has_children) AS plain';

/**
 * The columns every claim returns as they are, in ClaimedRow's order (then the times and the flag).
 * job_uid is the job's identity (migration 027), which its idempotency key is made of: every claim
 * returns it, or a job's key would change with the claim that took it.
 */
export const CLAIMED_COLUMNS: readonly string[] = [
  'id',
  'payload',
  'lease_token',
  'lease_claim_id',
  'attempt_count',
  'max_attempts',
  'priority',
  'job_uid',
];

/**
 * How a claim reads the job's identity (job_uid, migration 027). `named`: the column, in the
 * statements a process runs on a schema at 027 or later. `anySchema`: read from the row without
 * naming the column, so that the statement also runs on a schema before 027 (NULL there: those
 * jobs keep their `schema:id` key) and still returns the identity the moment 027 has run. It is
 * the claim a process of this version falls back to when the named one finds no column (a rolling
 * upgrade migrates under running workers: runLaneRouted, lane-routing.ts), and it costs a
 * row-to-jsonb conversion per claimed row, which the named one does not. A claim must never leave
 * out an identity the row has: the job's key would change between its attempts.
 */
export type UidRead = 'named' | 'anySchema';

/** CLAIMED_COLUMNS as a claim's RETURNING reads them from `jobs AS j`, the identity as `uid` says. */
export function claimedColumns(uid: UidRead): string[] {
  return CLAIMED_COLUMNS.map((column) =>
    column === 'job_uid' && uid === 'anySchema'
      ? "(to_jsonb(j) ->> 'job_uid')::uuid AS job_uid"
      : `j.${column}`,
  );
}

/** The names of the values computed above, read from their `AS`, so they are written once. */
export const CLAIMED_COMPUTED: readonly string[] = [
  ...`${CLAIMED_TIMES} ${CLAIMED_PLAIN}`.matchAll(/ AS (\w+)/g),
].map((match) => match[1] as string);

/** What one claim's lease grant sets beside what every grant sets, and which rows it takes. */
export interface LeaseGrant {
  /** The claim id's parameter: stamped on every row this statement claims, checked by every fenced write. */
  readonly claimId: string;
  /** When the lease starts: now(), or the throttle's clock (stamped after the limiter's lock). */
  readonly at: string;
  /** holds_key_slot: whether this run holds a slot of its concurrency key's per-key limit. */
  readonly keySlot: string;
  /** holds_queue_slot: whether this run holds a slot of the queue's concurrency limit. */
  readonly queueSlot: string;
  /** Comment lines said before the two slot flags. */
  readonly slotsWhy?: readonly string[];
  /** The rows to take: a FROM (optional) and the WHERE's condition. */
  readonly from?: string;
  readonly where: string;
  /** A further returned column (the round-robin claims' place in the turns). */
  readonly returnsAlso?: string;
  /** How the returned identity is read: `named` unless the statement must run before 027. */
  readonly uid: UidRead;
}

/**
 * The lease grant: pending -> running for the rows `grant.where` names. It increments
 * attempt_count and the fencing token (lease_token), stamps the owner ($2) and the claim id, and
 * starts a lease of $4 ms measured in database time. The claim is the attempt's durable record
 * (claimed_at, owner, token, claim id, attempt_count); the record that ends the attempt copies those
 * facts, so no claim writes an event row. `layout`: inside a CTE (`cte`), or as the statement's own
 * last write (`statement`, two columns shallower, its RETURNING wrapped a column later).
 */
export function leaseGrant(s: string, grant: LeaseGrant, layout: 'cte' | 'statement'): string {
  const at = layout === 'cte' ? '    ' : '  ';
  const set = `${at}    `;
  const why = (grant.slotsWhy ?? []).map((line) => `\n${set}-- ${line}`).join('');
  const from = grant.from === undefined ? '' : `${at}FROM ${grant.from}\n`;
  const columns = claimedColumns(grant.uid);
  const wrap = layout === 'cte' ? columns.length - 1 : columns.length;
  const returned = [...columns.slice(wrap), CLAIMED_TIMES, CLAIMED_PLAIN].join(', ');
  return `UPDATE ${s}.jobs AS j
${at}SET status = 'running',
${set}attempt_count = j.attempt_count + 1,
${set}lease_owner = $2,
${set}lease_token = j.lease_token + 1,
${set}lease_claim_id = ${grant.claimId},
${set}lease_expires_at = ${grant.at} + $4::double precision * interval '1 millisecond',
${set}claimed_at = ${grant.at},
${set}lease_extensions = 0,${why}
${set}holds_key_slot = ${grant.keySlot},
${set}holds_queue_slot = ${grant.queueSlot}
${from}${at}WHERE ${grant.where}
${at}RETURNING ${columns.slice(0, wrap).join(', ')},
${at}${' '.repeat('RETURNING '.length)}${returned}${grant.returnsAlso ?? ''}`;
}
