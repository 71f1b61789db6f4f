import { defineStatement, type Queryable, type Statement } from '../db.js';
import type { QueueClaimSettingsRow } from '../queues/queues.js';
import { idsFrom, perLaneCtes, runLaneRouted } from '../roles/lane-routing.js';
import { newClaimId } from './claim/claim-id.js';
import {
  CLAIMABLE,
  candidateWindow,
  type LeaseGrant,
  leaseGrant,
  plainQueueGate,
  type UidRead,
} from './claim/fragments.js';
import { PER_KEY_COLUMNS, perKeySettings, perKeySlotCtes } from './claim/per-key-limit.js';
import {
  SERVED_BY_CANDIDATES,
  SERVED_BY_CHOSEN,
  turnCandidateCtes,
  turnCursorCtes,
} from './claim/round-robin.js';
import {
  THROTTLE_ANSWER,
  THROTTLE_WINDOW,
  throttleCountCtes,
  throttleSettings,
  throttleVerdictCtes,
} from './claim/throttle.js';

export { newClaimId };

/**
 * The claim: pending -> running, for up to $3 jobs of queue $1 for owner $2, leased for $4 ms, in
 * one statement per batch. The caller commits at once (autocommit): no transaction outlives it.
 *
 * Every claim is made of these fragments, in this order (in claim/, the files named):
 * 1. The gate: a claim yields nothing for a queue that is not its kind. The plain claim's
 *    (`plainQueueGate`, fragments.ts) refuses a paused or limited queue; a limit's `settings` CTE
 *    (per-key-limit.ts, throttle.ts) or the round-robin `turn` (round-robin.ts) has no row unless
 *    the queue is one of theirs and not paused. A worker role calling a function directly is held
 *    to the same (issue 17).
 * 2. The candidates (`candidate`): the claimable jobs (`CLAIMABLE`, jobs_claimable_idx's
 *    predicate: jobs behind an ordering key or waiting for flow parents cost nothing) in preference
 *    order, locked with SKIP LOCKED (`candidateWindow`); or the same jobs in turns between
 *    fairness keys (`turnCandidateCtes`). A limit looks at a wider window ($5) than it takes.
 * 3. The limit, for a queue that has one: the per-key concurrency slots (per-key-limit.ts), or the
 *    rate and concurrency limit's debit (throttle.ts). Either ends in `chosen`, the jobs it counted.
 * 4. The lease grant (`leaseGrant`): the move to running, one more attempt, the fencing token
 *    incremented, the claim id and the lease in database time, and the slot flags that say what
 *    the run holds. The plain and round-robin claims update each row in the lane it was found in
 *    (`perLaneCtes`, lane-routing.ts), instead of every lane being probed for every id.
 * 5. After it, the round-robin cursor (`turnCursorCtes`) and the throttle's verdict and tally.
 * 6. What it returns: each job's `ClaimedRow` (its columns, its identity `job_uid`, its times as
 *    epoch ms, the `plain` flag its completion is chosen by), and the round-robin's `turn`, or the
 *    throttle's verdict row.
 *
 * Pay for what you use: the shape (`ClaimShape`) is chosen from the queue's settings
 * (`claimShapeOf`), and a plain queue's claim is the gate, the window, the grant and its columns,
 * nothing else. A stale choice cannot break a limit: the plain gate yields nothing for a limited
 * queue, and the router then re-reads the settings (runtime/claim-router.ts).
 * A shape is which candidates (`preference` order, or `turns` between fairness keys) and which
 * limit (`none`, the `per-key` slots, or the `throttle`): each valid pair is one named statement,
 * with a twin for a schema before 027 that reads the job's identity without naming its column
 * (`UidRead`, claim/fragments.ts; the plain claim's twin is its unrouted statement), which a
 * process falls back to during a rolling upgrade (runLaneRouted, lane-routing.ts).
 */
export type ClaimShape =
  | { readonly candidates: 'preference' | 'turns'; readonly limit: 'none' | 'per-key' }
  // A queue with a rate or concurrency limit is never round-robin (constraint queues_fairness_alone).
  | { readonly candidates: 'preference'; readonly limit: 'throttle' };

/** The one place a queue's claim is chosen: from the settings its claimer reads (readClaimSettings). */
export function claimShapeOf(settings: QueueClaimSettingsRow): ClaimShape {
  const perKey = settings.limit !== null ? 'per-key' : 'none';
  if (settings.fair) return { candidates: 'turns', limit: perKey };
  if (settings.throttled) return { candidates: 'preference', limit: 'throttle' };
  return { candidates: 'preference', limit: perKey };
}

/** The parameters after every claim's four ($1 queue, $2 owner, $3 limit, $4 lease ms), for a shape. */
function claimParams(shape: ClaimShape) {
  let next = 5;
  const take = () => `$${next++}`;
  const plain = shape.candidates === 'preference' && shape.limit === 'none';
  // How many candidates a limit looks at (wider than $3: jobs of a saturated key are passed over).
  const window = shape.limit === 'none' ? null : take();
  const claimId = take();
  // Where a plain claim starts its index walk ('-infinity' for the front; runtime/claim-floor.ts).
  const floor = plain ? take() : null;
  // The longest wait a claim short of concurrency slots is told (a slot frees unannounced).
  const recheck = shape.limit === 'throttle' ? take() : null;
  return { window, claimId, floor, recheck };
}

/** What a claim is asked for. */
export interface ClaimParams {
  queue: string;
  owner: string;
  limit: number;
  leaseMs: number;
  /** The plain claim's floor on available_at (null or absent: the front). */
  floor?: Date | null;
  /** The throttle's rate limit counts per concurrency key: a wider window. */
  perKeyRate?: boolean;
  /** The throttle's longest wait when slots ran short (ms). */
  recheckMs?: number;
}

/** The values for `claimParams`, in the same order. */
function claimValues(shape: ClaimShape, params: ClaimParams): unknown[] {
  const p = claimParams(shape);
  // The window passes over jobs of saturated keys; wider costs more locks per claim.
  const wide = Math.min(1000, Math.max(4 * params.limit, 100));
  const window = shape.limit === 'throttle' && !params.perKeyRate ? params.limit : wide;
  return [
    params.queue,
    params.owner,
    params.limit,
    params.leaseMs,
    ...(p.window ? [window] : []),
    newClaimId(),
    ...(p.floor ? [params.floor ?? '-infinity'] : []),
    ...(p.recheck ? [params.recheckMs] : []),
  ];
}

/** A grant that takes no slot: the plain and round-robin claims'. */
const FREE_OF_SLOTS = {
  at: 'now()',
  keySlot: 'false',
  queueSlot: 'false',
  slotsWhy: [
    'This run takes no per-key slot and no queue slot (a retried job may carry the flags',
    'from a limited claim).',
  ],
} as const;

/**
 * The one place the fragments of a shape's statement are chosen: its CTEs and the statement that
 * reads them. `routed`: the grant updates each row in its lane (the plain and round-robin claims);
 * a limit's grant updates the few rows it counted by id, through the parent. `uid`: how the grant
 * returns the job's identity (`UidRead`).
 */
function fragmentsOf(s: string, shape: ClaimShape, routed: boolean, uid: UidRead) {
  const p = claimParams(shape);
  const turns = shape.candidates === 'turns';
  const grant = (g: Omit<LeaseGrant, 'claimId' | 'uid'>, layout: 'cte' | 'statement') =>
    leaseGrant(s, { ...g, claimId: p.claimId, uid }, layout);
  switch (shape.limit) {
    case 'none': {
      // The plain claim pays for the gate, the window and the grant; the round-robin claim for its
      // turns and cursor besides. Neither takes a slot.
      const claimed = perLaneCtes('claimed', routed, (lane) =>
        grant({ ...FREE_OF_SLOTS, where: idsFrom('candidate', lane, '$1') }, 'cte'),
      );
      if (turns) {
        const ctes = [turnCandidateCtes(s, '$3'), claimed, ...turnCursorCtes(s, SERVED_BY_CANDIDATES)];
        const last = `-- Each claimed job with its place in the turns, so the worker starts them in that order.
  SELECT claimed.*, candidate.turn_order AS turn FROM claimed JOIN candidate USING (id)`;
        return { recursive: true, ctes, last };
      }
      const conditions = [...CLAIMABLE, `available_at >= ${p.floor}::timestamptz`, plainQueueGate(s)];
      const candidate = candidateWindow(s, { columns: routed ? 'id, lane' : 'id', conditions, limit: '$3' });
      return { recursive: false, ctes: [candidate, claimed], last: 'SELECT * FROM claimed' };
    }
    case 'per-key': {
      // The candidates, in preference order or turns, then the key slots; the grant is the
      // statement's own last write, marking the jobs it counted (`holds_key_slot`).
      const window = p.window ?? '';
      const candidate = turns
        ? turnCandidateCtes(s, window, PER_KEY_COLUMNS)
        : candidateWindow(s, {
            columns: ['id', ...PER_KEY_COLUMNS, 'available_at'].join(', '),
            conditions: [...CLAIMABLE, 'EXISTS (SELECT 1 FROM settings)'],
            limit: window,
          });
      const ctes = [
        perKeySettings(s, turns),
        candidate,
        ...perKeySlotCtes(s, turns),
        ...(turns ? turnCursorCtes(s, SERVED_BY_CHOSEN) : []),
      ];
      const last = grant(
        {
          at: 'now()',
          keySlot: 'chosen.counted',
          queueSlot: 'false',
          from: 'chosen',
          where: 'j.id = chosen.id',
          returnsAlso: turns ? ', chosen.turn_order AS turn' : '',
        },
        'statement',
      );
      return { recursive: turns, ctes, last };
    }
    case 'throttle': {
      // The limiter's lock and clock after the window, the debit, the grant (a queue slot each,
      // the lease from the clock), then the verdict the runner sleeps by.
      const claimed = grant(
        { at: '(SELECT at FROM clock)', keySlot: 'false', queueSlot: 'true', where: idsFrom('chosen', null) },
        'cte',
      );
      const ctes = [
        ...throttleSettings(s),
        candidateWindow(s, { ...THROTTLE_WINDOW, limit: p.window ?? '' }),
        ...throttleCountCtes(s),
        `claimed AS (\n    ${claimed}\n  )`,
        ...throttleVerdictCtes(s, p.recheck ?? ''),
      ];
      return { recursive: false, ctes, last: THROTTLE_ANSWER };
    }
  }
}

/** A shape's statement: its CTEs joined, then the statement that reads them. */
const claimStatement = (shape: ClaimShape, routed: boolean, uid: UidRead) => (s: string) => {
  const { recursive, ctes, last } = fragmentsOf(s, shape, routed, uid);
  return `\n  WITH ${recursive ? 'RECURSIVE ' : ''}${ctes.join(',\n  ')}\n  ${last}`;
};

const PLAIN: ClaimShape = { candidates: 'preference', limit: 'none' };
const PER_KEY: ClaimShape = { candidates: 'preference', limit: 'per-key' };
const TURNS: ClaimShape = { candidates: 'turns', limit: 'none' };
const TURNS_PER_KEY: ClaimShape = { candidates: 'turns', limit: 'per-key' };
const THROTTLE: ClaimShape = { candidates: 'preference', limit: 'throttle' };

/**
 * JobClaimMany: the plain claim, each lease taken in its row's lane. `available_at >= $6` starts
 * the index walk at a floor below which a worker knows nothing is claimable (runtime/claim-floor.ts).
 * The grant finds the locked rows with `id = ANY (ARRAY(...))` rather than a join: joined, the
 * planner costed a hash join over a sequential scan of jobs as cheaper than 500 primary-key probes
 * once tens of thousands were pending (12 ms instead of 4 ms for a claim of 500 at 50,000). Every
 * part names the queue ($1), so it is answered from that queue's part of a layout split by queue
 * (docs/scaling.md).
 */
export const JobClaimMany = defineStatement('claim_jobs', claimStatement(PLAIN, true, 'named'));
/**
 * JobClaimMany through the parent by id, reading the identity without naming it: for a schema
 * without lanes (018) or identities (027) yet (runLaneRouted).
 */
export const JobClaimManyUnrouted = defineStatement(
  'claim_jobs_unrouted',
  claimStatement(PLAIN, false, 'anySchema'),
);
/** The claim within a per-key concurrency limit, in preference order (per-key-limit.ts). */
export const JobClaimManyLimited = defineStatement(
  'claim_jobs_limited',
  claimStatement(PER_KEY, false, 'named'),
);
/** The round-robin claim (022): turns between fairness keys, each lease in its lane (round-robin.ts). */
export const JobClaimManyFair = defineStatement('claim_jobs_fair', claimStatement(TURNS, true, 'named'));
/** The per-key limited claim of a round-robin queue: the turns' candidates, ranked by turn. */
export const JobClaimManyLimitedFair = defineStatement(
  'claim_jobs_limited_fair',
  claimStatement(TURNS_PER_KEY, false, 'named'),
);
/** The claim within a rate or concurrency limit, with its verdict row (throttle.ts; 015). */
export const JobClaimManyThrottled = defineStatement(
  'claim_jobs_throttled',
  claimStatement(THROTTLE, false, 'named'),
);
/** The limited, round-robin and throttled claims for a schema before 027 (`UidRead`; runLaneRouted). */
export const JobClaimManyAnySchema = {
  limited: defineStatement('claim_jobs_limited_any_schema', claimStatement(PER_KEY, false, 'anySchema')),
  fair: defineStatement('claim_jobs_fair_any_schema', claimStatement(TURNS, true, 'anySchema')),
  limitedFair: defineStatement(
    'claim_jobs_limited_fair_any_schema',
    claimStatement(TURNS_PER_KEY, false, 'anySchema'),
  ),
  throttled: defineStatement('claim_jobs_throttled_any_schema', claimStatement(THROTTLE, false, 'anySchema')),
} as const;

/**
 * A shape's statement, and the twin runLaneRouted falls back to when it finds a column missing:
 * for the plain claim its statement through the parent (a schema before 018 or 027), for the
 * others the same statement reading the identity without naming it (a schema before 027).
 */
function statementsFor(shape: ClaimShape): {
  current: (schema: string) => Statement;
  anySchema: (schema: string) => Statement;
} {
  const any = JobClaimManyAnySchema;
  if (shape.limit === 'throttle') return { current: JobClaimManyThrottled, anySchema: any.throttled };
  if (shape.candidates === 'turns')
    return shape.limit === 'per-key'
      ? { current: JobClaimManyLimitedFair, anySchema: any.limitedFair }
      : { current: JobClaimManyFair, anySchema: any.fair };
  if (shape.limit === 'per-key') return { current: JobClaimManyLimited, anySchema: any.limited };
  return { current: JobClaimMany, anySchema: JobClaimManyUnrouted };
}

/** A row as the claim returns it. */
export interface ClaimedRow {
  id: string;
  payload: unknown;
  lease_token: string;
  lease_claim_id: string;
  attempt_count: number;
  max_attempts: number;
  priority: number;
  /**
   * The job's identity across failovers (migration 027: a random UUID drawn at insert, which a
   * reissued id never repeats); null for a job enqueued before 027.
   */
  job_uid: string | null;
  /** When the lease lapses, in database time (epoch ms). */
  lease_expires_ms: number;
  /** When the job became claimable, in database time (epoch ms). */
  available_ms: number;
  /** Its completion needs no ordering, key-slot or flow step (see CLAIMED_PLAIN). */
  plain: boolean;
  /** Its place in a round-robin claim's turns (claim/round-robin.ts; bigint text); absent from other claims. */
  turn?: string;
}

/** What the throttled claim found beside the jobs it claimed. */
export interface ThrottleVerdict {
  /** False when the queue has no limit (any more) or is paused: the caller re-reads its settings. */
  limited: boolean;
  /** When the limit cut the claim short: how long until capacity is next free (ms, database time). */
  waitMs: number | null;
  /** Which limit cut it short. */
  throttledBy: 'rate' | 'concurrency' | null;
}

/** The jobs a claim took, in the order to start them, and the throttle's verdict (null for other shapes). */
export interface ClaimOutcome {
  rows: ClaimedRow[];
  verdict: ThrottleVerdict | null;
}

type Row = ClaimedRow & { wait_ms?: number | null; throttled_by?: 'rate' | 'concurrency' | null };

/** Claims up to `params.limit` jobs of `params.queue` with the statement of `shape`. */
export async function claimJobsAs(
  db: Queryable,
  schema: string,
  shape: ClaimShape,
  params: ClaimParams,
): Promise<ClaimOutcome> {
  const { current, anySchema } = statementsFor(shape);
  const values = claimValues(shape, params);
  const result = await runLaneRouted<Row>(db, schema, current(schema), anySchema(schema), values);
  let rows: ClaimedRow[] = result;
  let verdict: ThrottleVerdict | null = null;
  if (shape.limit === 'throttle') {
    rows = [];
    verdict = { limited: false, waitMs: null, throttledBy: null };
    for (const { wait_ms = null, throttled_by = null, ...claimed } of result) {
      if (claimed.id === null) verdict = { limited: true, waitMs: wait_ms, throttledBy: throttled_by };
      else rows.push(claimed);
    }
  }
  // UPDATE ... RETURNING has no defined order: restore the preference order, or the turns' (in
  // preference order, a round-robin queue's big key's older jobs would start first in every batch).
  if (rows.length > 1) rows.sort(shape.candidates === 'turns' ? byTurn : byPreference);
  return { rows, verdict };
}

/** Claims up to `limit` jobs of a plain `queue` for `owner`; rows come back in preference order. */
export async function claimJobs(db: Queryable, schema: string, params: ClaimParams): Promise<ClaimedRow[]> {
  return (await claimJobsAs(db, schema, PLAIN, params)).rows;
}

/**
 * Claims like `claimJobs`, within the queue's rate and concurrency limits; `perKey` widens the
 * window (a per-key rate limit), `recheckMs` caps the wait when slots (not starts) ran short.
 */
export async function claimJobsThrottled(
  db: Queryable,
  schema: string,
  params: ClaimParams & { perKey: boolean; recheckMs: number },
): Promise<{ rows: ClaimedRow[]; verdict: ThrottleVerdict }> {
  const { rows, verdict } = await claimJobsAs(db, schema, THROTTLE, { ...params, perKeyRate: params.perKey });
  return { rows, verdict: verdict ?? { limited: false, waitMs: null, throttledBy: null } };
}

/** Sorts claimed rows into preference order (UPDATE ... RETURNING has none). */
export function byPreference(a: ClaimedRow, b: ClaimedRow): number {
  if (a.priority !== b.priority) return b.priority - a.priority;
  const byTime = a.available_ms - b.available_ms;
  if (byTime !== 0) return byTime;
  // ids are decimal strings without leading zeros: shorter is smaller, then compare as text.
  return a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Sorts a round-robin claim's rows into turn order (`turn`, returned by those claims only). */
export function byTurn(a: ClaimedRow, b: ClaimedRow): number {
  return Number(a.turn) - Number(b.turn);
}
