import { defineStatement, type Queryable, run } from './db.js';
import { wakeupChannel } from './enqueue.js';
import { FENCE_INPUT_ARRAYS, FENCE_INPUT_COLUMNS, type FenceRef, fenceArrays, fencedCte } from './fence.js';
import { flowReleaseCte, flowWakeups } from './flow-release.js';
import { keySlotsReleaseCte } from './key-slots.js';
import { orderingAdvanceCte, orderingRepairNeeded, orderingWakeups, repairOrderingKeys } from './ordering.js';
import { refusalCountingCte } from './refusals.js';

/**
 * JobCompleteMany: running -> succeeded, for a batch of leases in one statement.
 * Each row must still carry the presented owner and token with an unexpired lease (database time);
 * a row that does not is left untouched and counted as a lost-fence attempt. An accepted job leaves
 * the hot table: it is deleted from jobs and its compact record inserted into finished_jobs, in
 * the same statement (a delete is cheaper than an update, and keeps jobs and its indexes small).
 * That record is the attempt's audit entry (owner, token, claim id, attempt, claimed_at, lease extensions,
 * finished_at): a completion writes no job_events row.
 * Looks rows up by primary key; takes the row lock of each job it changes.
 * A completed head of an ordering key hands the key to its next job (claimable from this commit,
 * with a wake-up), and a job that held a per-key concurrency slot gives it back, both in this
 * statement; plain jobs write nothing for either (see ordering.ts and key-slots.ts).
 * A completed flow parent (has_children) releases its children in this statement too: only the
 * accepted rows of `changed` reach flowReleaseCte, so a refused (stale) completion releases nothing;
 * a child whose last parent this was is claimable from this commit, with a wake-up (flow-release.ts).
 */
const JobCompleteMany = defineStatement(
  'complete_jobs',
  (s) => `
  WITH input AS (
    SELECT * FROM unnest(${FENCE_INPUT_ARRAYS}) AS t(${FENCE_INPUT_COLUMNS})
  ),
  ${fencedCte(s)},
  changed AS (
    DELETE FROM ${s}.jobs AS j
    WHERE j.id = ANY (ARRAY(SELECT id FROM fenced))
    RETURNING j.id, j.queue_name, j.priority, j.attempt_count, j.max_attempts, j.lease_owner,
              j.lease_token, j.lease_claim_id, j.created_at, j.claimed_at, j.lease_extensions,
              j.ordering_key, j.concurrency_key, j.holds_key_slot, j.has_children
  ),
  finished AS (
    INSERT INTO ${s}.finished_jobs (id, queue_name, priority, attempt_count, max_attempts, lease_owner,
                                    lease_token, lease_claim_id, created_at, claimed_at, finished_at,
                                    lease_extensions)
    SELECT id, queue_name, priority, attempt_count, max_attempts, lease_owner,
           lease_token, lease_claim_id, created_at, claimed_at, now(), lease_extensions
    FROM changed
  ),
  ${orderingAdvanceCte(s, 'changed')},
  ${keySlotsReleaseCte(s, 'changed')},
  ${flowReleaseCte(s, 'changed')},
  ${refusalCountingCte(s, 'complete')}
  SELECT id, ${orderingRepairNeeded()} AS repair, ${orderingWakeups('$6')} AS woken,
         ${flowWakeups('$6')} AS flow_woken
  FROM changed`,
);

/** Completes the leases it can; returns the ids whose completion was accepted. */
export async function completeJobs(
  db: Queryable,
  schema: string,
  refs: readonly FenceRef[],
): Promise<Set<string>> {
  if (refs.length === 0) return new Set();
  const rows = await run<{ id: string; repair: string[] }>(db, JobCompleteMany(schema), [
    ...fenceArrays(refs),
    wakeupChannel(schema),
  ]);
  // Rare: a key's next job was enqueued (or cancelled) while this statement ran; hand it over now.
  const repair = rows[0]?.repair ?? [];
  if (repair.length > 0) await repairOrderingKeys(db, schema, repair, repair.length);
  return new Set(rows.map((row) => row.id));
}
