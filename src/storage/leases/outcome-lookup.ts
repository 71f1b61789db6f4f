import { defineStatement, type Queryable, run } from '../db.js';
import type { FenceRef } from '../fence.js';

/** What a landed outcome write did to its job. */
export type LandedOutcome = 'completed' | 'retry' | 'dead' | 'snoozed';

/**
 * JobOutcomeFind: reads, changing nothing, whether outcome writes whose answer was lost with their
 * connection landed: a completion left the claim's record in finished_jobs, a failure or snooze
 * left the event ending that claim in job_events (a refusal's event is not one). Matched by job,
 * token, claim id and owner, so a later claim of the same job never answers for this one, not even
 * one that reissued the same token number to the same owner after an asynchronous failover (the
 * claim id tells them apart; records from before migration 010 carry none and match nothing). Looks up
 * finished_jobs by primary key and job_events by job_events_job_idx; takes no locks.
 */
const JobOutcomeFind = defineStatement(
  'find_landed_outcomes',
  (s) => `
  WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[]) AS t(id, token, claim_id, owner)
  )
  SELECT f.id::text AS id, 'completed' AS outcome
  FROM input JOIN ${s}.finished_jobs AS f
    ON f.id = input.id AND f.lease_token = input.token AND f.lease_claim_id = input.claim_id
   AND f.lease_owner = input.owner
  UNION ALL
  SELECT e.job_id::text,
         CASE e.kind WHEN 'retried' THEN 'retry' WHEN 'dead' THEN 'dead' ELSE 'snoozed' END
  FROM input JOIN ${s}.job_events AS e
    ON e.job_id = input.id AND e.lease_token = input.token AND e.lease_claim_id = input.claim_id
   AND e.lease_owner = input.owner
   AND e.kind IN ('retried', 'dead', 'snoozed', 'skipped')`,
);

/** For writes whose answer was lost: the outcome of each that landed, by job id. */
export async function findLandedOutcomes(
  db: Queryable,
  schema: string,
  refs: readonly FenceRef[],
): Promise<Map<string, LandedOutcome>> {
  if (refs.length === 0) return new Map();
  const rows = await run<{ id: string; outcome: LandedOutcome }>(db, JobOutcomeFind(schema), [
    refs.map((ref) => ref.jobId),
    refs.map((ref) => ref.token),
    refs.map((ref) => ref.claimId),
    refs.map((ref) => ref.owner),
  ]);
  return new Map(rows.map((row) => [row.id, row.outcome]));
}
