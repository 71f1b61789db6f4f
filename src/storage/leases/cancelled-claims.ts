import { defineStatement, type Queryable, run } from '../db.js';
import { type FenceRef, leaseKey } from '../fence.js';

/**
 * JobCancelledClaims: which of these claims a cancel ended (its `cancelled` event names the claim it
 * ended: token and claim id). Read-only, no locks; served by job_events_job_idx (one probe per job).
 * Sent only after the fence refused a renewal, so a worker can tell its handler "cancelled" rather
 * than "lease lost"; no statement of the hot path reads it.
 */
const JobCancelledClaims = defineStatement(
  'cancelled_claims',
  (s) => `
  SELECT e.job_id::text AS id, e.lease_token::text AS token, e.lease_claim_id::text AS claim_id
  FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS t(id, token, claim_id)
  JOIN ${s}.job_events AS e
    ON e.job_id = t.id AND e.kind = 'cancelled' AND e.lease_token = t.token AND e.lease_claim_id = t.claim_id`,
);

/** The `leaseKey`s of the given claims that a cancel ended. */
export async function cancelledClaims(
  db: Queryable,
  schema: string,
  refs: readonly Pick<FenceRef, 'jobId' | 'token' | 'claimId'>[],
): Promise<Set<string>> {
  if (refs.length === 0) return new Set();
  const rows = await run<{ id: string; token: string; claim_id: string }>(db, JobCancelledClaims(schema), [
    refs.map((ref) => ref.jobId),
    refs.map((ref) => ref.token),
    refs.map((ref) => ref.claimId),
  ]);
  return new Set(rows.map((row) => leaseKey({ jobId: row.id, token: row.token, claimId: row.claim_id })));
}
