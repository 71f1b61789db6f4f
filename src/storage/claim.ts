import { randomBytes } from 'node:crypto';
import { defineStatement, type Queryable } from './db.js';
import { idsFrom, perLaneCtes, runLaneRouted } from './lane-routing.js';

/**
 * The claim's two timestamps, as epoch milliseconds (float8). Parsed from timestamptz text, two
 * dates per claimed row were the largest single cost of the worker process after garbage
 * collection in a 50,000-job drain (a regular expression and a Date built from parts, per value).
 */
export const CLAIMED_TIMES = `(extract(epoch FROM j.lease_expires_at) * 1000)::float8 AS lease_expires_ms,
            (extract(epoch FROM j.available_at) * 1000)::float8 AS available_ms`;

/**
 * Whether the run's completion has nothing to do beyond the fence and the lane move: no ordering
 * key to hand over, no key slot to give back, no flow children to release. Each is fixed before
 * the completion (an ordering key and children at enqueue, a key slot by this claim), so the
 * worker chooses the plain completion from it (complete.ts), which checks it again.
 */
export const CLAIMED_PLAIN =
  '(j.ordering_key IS NULL AND NOT j.holds_key_slot AND NOT j.has_children) AS plain';

/**
 * How a claim reads the job's identity (job_uid, migration 027). `named`: the column, for the
 * statements a process runs on a schema at 027 or later. `anySchema`: read from the row without
 * naming the column, so that the statement also runs on a schema before 027 (NULL there: those
 * jobs keep their `schema:id` key) and still returns the identity the moment 027 has run. It is
 * the claim a process of this version falls back to when the named one finds no column (a rolling
 * upgrade migrates under running workers; see runLaneRouted in lane-routing.ts), and it costs a
 * row-to-jsonb conversion per claimed row, which the named one does not. A claim must never leave
 * out an identity the row has: the job's key would change between its attempts.
 */
export type UidRead = 'named' | 'anySchema';

/**
 * What every claim returns of each job it took (the plain, limited, throttled and round-robin
 * claims), as `ClaimedRow`: one list, so that a column the runtime needs (the job's identity,
 * job_uid, migration 027) is returned by all of them.
 */
export const claimedColumns = (
  uid: UidRead,
) => `j.id, j.payload, j.lease_token, j.lease_claim_id, j.attempt_count,
              j.max_attempts, j.priority, ${uid === 'named' ? 'j.job_uid' : `(to_jsonb(j) ->> 'job_uid')::uuid AS job_uid`},
              ${CLAIMED_TIMES}, ${CLAIMED_PLAIN}`;

/**
 * JobClaimMany: pending -> running, for up to $3 jobs of queue $1, in one statement.
 * The locking subquery takes row locks with SKIP LOCKED, so concurrent claimers pass each other
 * instead of waiting; the update increments attempt_count and the fencing token and starts a lease
 * measured in database time. Served by jobs_claimable_idx. The caller commits at once (autocommit):
 * no transaction outlives this statement.
 * ORDER BY is a preference, not a promise: a claimer skips rows locked by a peer.
 * A paused queue yields nothing, and so does a queue with a per-key concurrency limit (its claims
 * go through JobClaimManyLimited, see claim-limited.ts) or a rate or concurrency limit (through
 * JobClaimManyThrottled, see claim-throttled.ts): the NOT EXISTS depends only on $1, so
 * PostgreSQL evaluates it once per statement (a primary-key probe of queues) before touching jobs.
 * Jobs waiting behind the head of their ordering key are outside jobs_claimable_idx
 * (awaits_predecessor), so ordering keys cost the plain claim nothing. The claim is the attempt's
 * durable record (claimed_at, owner, token, claim id $5, attempt_count); the record that ends the attempt
 * copies those facts, so the claim writes no event row.
 * $6 is a floor on available_at ('-infinity' for none): a worker that knows nothing claimable
 * lies below it starts the index walk there instead of at the front (see runtime/claim-floor.ts).
 * The update finds the locked rows with `id = ANY (ARRAY(...))` rather than a join: joined, the
 * planner costed a hash join over a sequential scan of jobs as cheaper than 500 primary-key probes
 * once tens of thousands were pending (12 ms instead of 4 ms for a claim of 500 at 50,000).
 * The update is split by lane (lane-routing.ts): each locked row is updated in the lane it was
 * found in, instead of every lane being probed for every id. JobClaimManyUnrouted is the same
 * claim for a schema without lanes. The update also names the queue ($1), as the locking subquery
 * does: every part of the statement is then answerable from that queue's part of a layout split by
 * queue (docs/scaling.md).
 */
const claimStatement = (routed: boolean) => (s: string) =>
  `
  WITH candidate AS (
    SELECT id${routed ? ', lane' : ''}
    FROM ${s}.jobs
    WHERE queue_name = $1
      AND status = 'pending'
      AND NOT awaits_predecessor
      AND waiting_parents = 0
      AND available_at <= now()
      AND available_at >= $6::timestamptz
      AND NOT EXISTS (
        SELECT 1 FROM ${s}.queues
        WHERE name = $1
          AND (paused OR concurrency_limit_per_key IS NOT NULL OR rate_limit_max IS NOT NULL
               OR concurrency_limit IS NOT NULL))
    ORDER BY priority DESC, available_at, id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
  ),
  ${perLaneCtes('claimed', routed, (lane) => takeLeases(s, lane, routed ? 'named' : 'anySchema'))}
  SELECT * FROM claimed`;

/**
 * The update that takes the lease of every `candidate` row in `lane` (owner $2, lease $4 ms, claim
 * id $5, a new token, one more attempt) and returns the claimed row: the plain claim's, and the
 * round-robin claim's over its own candidates (claim-fair.ts). Neither takes a slot.
 */
export const takeLeases = (s: string, lane: number | null, uid: UidRead) => `UPDATE ${s}.jobs AS j
    SET status = 'running',
        attempt_count = j.attempt_count + 1,
        lease_owner = $2,
        lease_token = j.lease_token + 1,
        lease_claim_id = $5,
        lease_expires_at = now() + $4::double precision * interval '1 millisecond',
        claimed_at = now(),
        lease_extensions = 0,
        -- This run takes no per-key slot and no queue slot (a retried job may carry the flags
        -- from a limited claim).
        holds_key_slot = false,
        holds_queue_slot = false
    WHERE ${idsFrom('candidate', lane, '$1')}
    RETURNING ${claimedColumns(uid)}`;

/** The claim described above, routed to the lane of each claimed row. */
export const JobClaimMany = defineStatement('claim_jobs', claimStatement(true));
/**
 * JobClaimMany through the parent by id, reading the identity without naming it: for a schema
 * without lanes (018) or identities (027) yet (runLaneRouted).
 */
export const JobClaimManyUnrouted = defineStatement('claim_jobs_unrouted', claimStatement(false));

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
  /** Its place in a round-robin claim's turns (claim-fair.ts; bigint text); absent from other claims. */
  turn?: string;
}

/** Claims up to `limit` jobs of `queue` for `owner`; rows come back in preference order. */
export async function claimJobs(
  db: Queryable,
  schema: string,
  params: { queue: string; owner: string; limit: number; leaseMs: number; floor?: Date | null },
): Promise<ClaimedRow[]> {
  const rows = await runLaneRouted<ClaimedRow>(
    db,
    schema,
    JobClaimMany(schema),
    JobClaimManyUnrouted(schema),
    [params.queue, params.owner, params.limit, params.leaseMs, newClaimId(), params.floor ?? '-infinity'],
  );
  // UPDATE ... RETURNING has no defined order; restore the preference order for callers.
  if (rows.length > 1) rows.sort(byPreference);
  return rows;
}

/**
 * A fresh random claim id (a signed 64-bit integer, as a decimal string) for one claim statement:
 * stamped on every row it claims and checked by every fenced write beside the token.
 */
export function newClaimId(): string {
  return randomBytes(8).readBigInt64BE().toString();
}

/** Sorts claimed rows into preference order (UPDATE ... RETURNING has none). */
export function byPreference(a: ClaimedRow, b: ClaimedRow): number {
  if (a.priority !== b.priority) return b.priority - a.priority;
  const byTime = a.available_ms - b.available_ms;
  if (byTime !== 0) return byTime;
  // ids are decimal strings without leading zeros: shorter is smaller, then compare as text.
  return a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}
