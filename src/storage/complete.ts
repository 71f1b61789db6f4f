import { defineStatement, type Queryable } from './db.js';
import { wakeupChannel } from './enqueue.js';
import {
  byQueue,
  FENCE_INPUT_ARRAYS,
  FENCE_INPUT_COLUMNS,
  type FenceRef,
  fenceArrays,
  fencedCte,
} from './fence.js';
import { finishedChannel, finishNoticesCte, finishNoticesSent } from './finish-notices.js';
import { flowReleaseCte, flowWakeups } from './flow-release.js';
import { keySlotsReleaseCte } from './key-slots.js';
import { idsFrom, perLaneCtes, runLaneRouted } from './lane-routing.js';
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
 * Looks rows up by id; takes the row lock of each job it changes, and deletes each in the lane it
 * was locked in (lane-routing.ts).
 * A completed head of an ordering key hands the key to its next job (claimable from this commit,
 * with a wake-up), and a job that held a per-key concurrency slot gives it back, both in this
 * statement; plain jobs write nothing for either (see ordering.ts and key-slots.ts).
 * Jobs someone waits for (`lh.waitFor`) are announced in one notification per batch
 * (finish-notices.ts); a batch of jobs nobody waits for notifies nothing.
 * Two variants: a batch in which some handler returned a value ($7, JSON texts, null where none)
 * stores each in its finished record, joined by id from the fenced input; a batch without results
 * (plain jobs) runs the statement without that parameter or join, so it pays nothing for them.
 * A completed flow parent (has_children) releases its children in this statement too: only the
 * accepted rows of `changed` reach flowReleaseCte, so a refused (stale) completion releases nothing;
 * a child whose last parent this was is claimable from this commit, with a wake-up (flow-release.ts).
 * A batch is of one queue ($8, or $9 with results): the fence's probe and the delete name it, so the
 * statement is answered from that queue's part of a layout split by queue (docs/scaling.md); a
 * batch of several queues is sent as one statement per queue (`completeJobs`).
 */
/** The completion's scalar queue parameter: the batch is of one queue (`byQueue`). */
const queueParam = (withResults: boolean) => (withResults ? '$9' : '$8');

const completeStatement = (withResults: boolean, routed: boolean) => (s: string) =>
  `
  WITH input AS (
    SELECT * FROM unnest(${FENCE_INPUT_ARRAYS}${withResults ? ', $7::text[]' : ''})
      AS t(${FENCE_INPUT_COLUMNS}${withResults ? ', result' : ''})
  ),
  ${fencedCte(s, routed, queueParam(withResults))},
  ${perLaneCtes(
    'changed',
    routed,
    (lane) => `DELETE FROM ${s}.jobs AS j
    WHERE ${idsFrom('fenced', lane, queueParam(withResults))}
    RETURNING j.id, j.queue_name, j.priority, j.attempt_count, j.max_attempts, j.lease_owner,
              j.lease_token, j.lease_claim_id, j.created_at, j.claimed_at, j.lease_extensions,
              j.ordering_key, j.concurrency_key, j.holds_key_slot, j.notify_on_finish, j.has_children`,
  )},
  finished AS (
    INSERT INTO ${s}.finished_jobs (id, queue_name, priority, attempt_count, max_attempts, lease_owner,
                                    lease_token, lease_claim_id, created_at, claimed_at, finished_at,
                                    lease_extensions${withResults ? ', result' : ''})
    SELECT c.id, ${queueParam(withResults)}::text, c.priority, c.attempt_count, c.max_attempts, c.lease_owner,
           c.lease_token, c.lease_claim_id, c.created_at, c.claimed_at, now(), c.lease_extensions${
             withResults ? ', f.result::jsonb' : ''
           }
    FROM changed AS c${withResults ? ' JOIN fenced AS f ON f.id = c.id' : ''}
  ),
  ${orderingAdvanceCte(s, 'changed', queueParam(withResults))},
  ${keySlotsReleaseCte(s, 'changed', queueParam(withResults))},
  ${flowReleaseCte(s, 'changed', routed)},
  ${refusalCountingCte(s, 'complete', queueParam(withResults))},
  ${finishNoticesCte('changed', 'notify_on_finish', withResults ? '$8' : '$7')}
  SELECT id, ${orderingRepairNeeded()} AS repair, ${orderingWakeups('$6')} AS woken,
         ${finishNoticesSent()} AS announced, ${flowWakeups('$6')} AS flow_woken
  FROM changed`;

/** The completion described above, for a batch without results, routed to the lane of each job. */
export const JobCompleteMany = defineStatement('complete_jobs', completeStatement(false, true));
/** The completion described above, storing each handler's result, routed to the lane of each job. */
export const JobCompleteManyWithResults = defineStatement(
  'complete_jobs_with_results',
  completeStatement(true, true),
);
/** The completions through the parent by id, for a schema without lanes (018) or edge queues (019) yet (runLaneRouted). */
const JobCompleteManyUnrouted = defineStatement('complete_jobs_unrouted', completeStatement(false, false));
const JobCompleteManyWithResultsUnrouted = defineStatement(
  'complete_jobs_with_results_unrouted',
  completeStatement(true, false),
);

/** A lease to complete, with the handler's result as JSON text (null or absent: none). */
export interface CompleteRef extends FenceRef {
  result?: string | null;
}

/** Completes the leases it can; returns the ids whose completion was accepted. */
export async function completeJobs(
  db: Queryable,
  schema: string,
  refs: readonly CompleteRef[],
): Promise<Set<string>> {
  const accepted = new Set<string>();
  for (const group of byQueue(refs)) {
    for (const id of await completeQueueJobs(db, schema, group)) accepted.add(id);
  }
  return accepted;
}

/** Completes the leases of one queue in one statement. */
async function completeQueueJobs(
  db: Queryable,
  schema: string,
  refs: readonly CompleteRef[],
): Promise<string[]> {
  const withResults = refs.some((ref) => ref.result != null);
  const queue = refs[0]?.queue ?? null;
  const rows = await runLaneRouted<{ id: string; repair: string[] }>(
    db,
    schema,
    (withResults ? JobCompleteManyWithResults : JobCompleteMany)(schema),
    (withResults ? JobCompleteManyWithResultsUnrouted : JobCompleteManyUnrouted)(schema),
    withResults
      ? [
          ...fenceArrays(refs),
          wakeupChannel(schema),
          refs.map((ref) => ref.result ?? null),
          finishedChannel(schema),
          queue,
        ]
      : [...fenceArrays(refs), wakeupChannel(schema), finishedChannel(schema), queue],
  );
  // Rare: a key's next job was enqueued (or cancelled) while this statement ran; hand it over now.
  const repair = rows[0]?.repair ?? [];
  if (repair.length > 0) await repairOrderingKeys(db, schema, repair, repair.length);
  return rows.map((row) => row.id);
}
