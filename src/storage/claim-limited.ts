import { byPreference, type ClaimedRow, claimedColumns, newClaimId, type UidRead } from './claim.js';
import { byTurn, fairCandidateCtes } from './claim-fair.js';
import { defineStatement, type Queryable } from './db.js';
import { runLaneRouted } from './lane-routing.js';

/**
 * JobClaimManyLimited: pending -> running, for up to $3 jobs of queue $1, with at most the queue's
 * concurrency_limit_per_key jobs of one concurrency key running at once, across all workers.
 * Used only for queues with a limit configured, so plain claims never pay for it. Yields nothing for
 * a queue with a rate or concurrency limit (015), as the plain claim does: those go through
 * JobClaimManyThrottled, which alone keeps the limiter rows.
 *
 * 1. `candidate` locks a window of $5 claimable jobs in preference order (SKIP LOCKED, served by
 *    jobs_claimable_idx), wider than $3 so jobs of a saturated key can be passed over.
 * 2. `pre` keeps, per key, only as many as the counters this statement's snapshot shows room for,
 *    then the first $3 in preference order: an optimistic choice that may still be too many.
 * 3. `slots` takes each chosen key's counter row lock in key order (no deadlock between claimers),
 *    reading the latest committed count, and grants least(wanted, limit - running), adding it to
 *    `running` in the same write (a new key's row starts with what `pre` wanted, which is within
 *    the limit). A concurrent claimer of the same key waits here, then sees ours.
 * 4. Only the first `granted` jobs of each key in `pre` are claimed: exactly what was counted.
 * Jobs without a concurrency key are claimed as usual. The transitions that end a run (complete,
 * fail, snooze, recovery, cancel) give the slot back (see key-slots.ts).
 */
/** The preference order of the limited claim: the plain one, or the fair claim's turns. */
const order = (fair: boolean) => (fair ? 'turn_order' : 'priority DESC, available_at, id');

/** The fair variant moves the round-robin cursor to the last key of the jobs it chose (claim-fair.ts). */
const fairCursor = (s: string) => `
  cursor_row AS (
    SELECT queue_name FROM ${s}.fair_turns WHERE queue_name = $1 AND EXISTS (SELECT 1 FROM walked_last)
    FOR UPDATE SKIP LOCKED
  ),
  advanced AS (
    UPDATE ${s}.fair_turns AS t
    SET last_key = coalesce(
          (SELECT c.key FROM chosen JOIN candidate AS c USING (id)
           WHERE c.key IS NOT NULL ORDER BY c.turn_order DESC LIMIT 1),
          (SELECT key FROM walked_last))
    FROM cursor_row
    WHERE t.queue_name = cursor_row.queue_name
  )`;

const limitedStatement = (fair: boolean, uid: UidRead) => (s: string) =>
  `
  WITH ${fair ? 'RECURSIVE ' : ''}settings AS (
    SELECT concurrency_limit_per_key AS per_key
    FROM ${s}.queues
    -- Nothing for a queue with a rate or concurrency limit: those are the throttled claim's (a
    -- worker role calling this function directly must not step around them; issue 17).
    WHERE name = $1 AND NOT paused AND rate_limit_max IS NULL AND concurrency_limit IS NULL${
      fair ? " AND fairness = 'round-robin'" : ''
    }
  ),
  ${
    fair
      ? `${fairCandidateCtes(s, '$5', ['concurrency_key', 'priority'])},
`
      : `candidate AS (
    SELECT id, concurrency_key, priority, available_at
    FROM ${s}.jobs
    WHERE queue_name = $1
      AND status = 'pending'
      AND NOT awaits_predecessor
      AND waiting_parents = 0
      AND available_at <= now()
      AND EXISTS (SELECT 1 FROM settings)
    ORDER BY priority DESC, available_at, id
    LIMIT $5
    FOR UPDATE SKIP LOCKED
  ),
`
  }  ranked AS (
    SELECT c.*, row_number() OVER (
             PARTITION BY c.concurrency_key ORDER BY ${fair ? 'c.turn_order' : 'c.priority DESC, c.available_at, c.id'}) AS rn,
           greatest(0, (SELECT per_key FROM settings) - coalesce(k.running, 0)) AS room
    FROM candidate AS c
    LEFT JOIN ${s}.concurrency_keys AS k ON k.queue_name = $1 AND k.concurrency_key = c.concurrency_key
  ),
  pre AS (
    SELECT id, concurrency_key, priority, available_at,${fair ? ' turn_order,' : ''}
           row_number() OVER (PARTITION BY concurrency_key ORDER BY ${order(fair)}) AS rn
    FROM (
      SELECT * FROM ranked
      WHERE concurrency_key IS NULL OR (SELECT per_key FROM settings) IS NULL OR rn <= room
      ORDER BY ${order(fair)}
      LIMIT $3
    ) AS first
  ),
  slots AS (
    INSERT INTO ${s}.concurrency_keys AS k (queue_name, concurrency_key, running, granted)
    SELECT $1, w.concurrency_key, w.n, w.n
    FROM (SELECT concurrency_key, count(*)::int AS n FROM pre
          WHERE concurrency_key IS NOT NULL AND (SELECT per_key FROM settings) IS NOT NULL
          GROUP BY concurrency_key) AS w
    ORDER BY w.concurrency_key
    ON CONFLICT (queue_name, concurrency_key) DO UPDATE
      SET granted = least(excluded.granted, greatest(0, (SELECT per_key FROM settings) - k.running)),
          running = k.running + least(excluded.granted, greatest(0, (SELECT per_key FROM settings) - k.running))
    RETURNING k.concurrency_key, k.granted
  ),
  chosen AS (
    SELECT pre.id, pre.concurrency_key IS NOT NULL AND slots.concurrency_key IS NOT NULL AS counted${
      fair ? ', pre.turn_order' : ''
    }
    FROM pre
    LEFT JOIN slots ON slots.concurrency_key = pre.concurrency_key
    WHERE slots.concurrency_key IS NULL OR pre.rn <= slots.granted
  )${fair ? `,${fairCursor(s)}` : ''}
  UPDATE ${s}.jobs AS j
  SET status = 'running',
      attempt_count = j.attempt_count + 1,
      lease_owner = $2,
      lease_token = j.lease_token + 1,
      lease_claim_id = $6,
      lease_expires_at = now() + $4::double precision * interval '1 millisecond',
      claimed_at = now(),
      lease_extensions = 0,
      holds_key_slot = chosen.counted,
      holds_queue_slot = false
  FROM chosen
  WHERE j.id = chosen.id
  RETURNING ${claimedColumns(uid)}${fair ? ', chosen.turn_order AS turn' : ''}`;

/** The limited claim described above. */
export const JobClaimManyLimited = defineStatement('claim_jobs_limited', limitedStatement(false, 'named'));
/**
 * JobClaimManyLimited for a round-robin queue (022): its candidates are the fair claim's
 * (claim-fair.ts, a window of $5 in turns between fairness keys), ranked by turn instead of
 * preference, and it moves the queue's cursor as the fair claim does.
 */
export const JobClaimManyLimitedFair = defineStatement(
  'claim_jobs_limited_fair',
  limitedStatement(true, 'named'),
);
/** The two limited claims for a schema before 027 (claim.ts, `UidRead`; runLaneRouted). */
const JobClaimManyLimitedAnySchema = defineStatement(
  'claim_jobs_limited_any_schema',
  limitedStatement(false, 'anySchema'),
);
const JobClaimManyLimitedFairAnySchema = defineStatement(
  'claim_jobs_limited_fair_any_schema',
  limitedStatement(true, 'anySchema'),
);

/**
 * Claims like `claimJobs`, within the queue's per-key concurrency limit; with `fair`, in turns
 * between fairness keys (a round-robin queue).
 */
export async function claimJobsLimited(
  db: Queryable,
  schema: string,
  params: { queue: string; owner: string; limit: number; leaseMs: number; fair?: boolean },
): Promise<ClaimedRow[]> {
  // The window passes over jobs of saturated keys; wider costs more locks per claim.
  const window = Math.min(1000, Math.max(4 * params.limit, 100));
  const [named, anySchema] = params.fair
    ? [JobClaimManyLimitedFair, JobClaimManyLimitedFairAnySchema]
    : [JobClaimManyLimited, JobClaimManyLimitedAnySchema];
  const rows = await runLaneRouted<ClaimedRow>(db, schema, named(schema), anySchema(schema), [
    params.queue,
    params.owner,
    params.limit,
    params.leaseMs,
    window,
    newClaimId(),
  ]);
  if (rows.length > 1) rows.sort(params.fair ? byTurn : byPreference);
  return rows;
}
