import { cancelledSet } from '../cancel-set.js';
import { defineStatement, type Queryable, run } from '../db.js';
import { finishedChannel, finishNoticesCte, finishNoticesSent } from '../finish-notices.js';
import { flowParentDeadCtes, flowWakeups } from '../flows/flow-release.js';
import { wakeupChannel } from '../jobs/enqueue.js';
import { keySlotsReleaseCte } from '../queues/key-slots.js';
import {
  orderingAdvanceCte,
  orderingRepairNeeded,
  orderingWakeups,
  repairOrderingKeys,
} from '../queues/ordering.js';

/**
 * What a cancel does beside the status change, the same for one job (JobCancel) and for a listed
 * batch (JobCancelListed), over the rows of their `changed` CTE: a dead parent's children follow
 * their `onParentDead`, the ordering key and the key slot are handed on, and a `cancelled` event
 * with actor $2 and reason $3 records the claim a running job lost.
 */
const cancelledEffects = (s: string) => `${flowParentDeadCtes(s, 'changed')},
  ${orderingAdvanceCte(s, 'changed')},
  ${keySlotsReleaseCte(s, 'changed')},
  recorded AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, status_after, attempt, lease_owner, lease_token,
                                 lease_claim_id, claimed_at, lease_extensions, error_code, actor, reason)
    SELECT id, queue_name, 'cancelled', 'cancelled',
           CASE WHEN was = 'running' THEN attempt_count END,
           CASE WHEN was = 'running' THEN lease_owner END,
           CASE WHEN was = 'running' THEN lease_token END,
           CASE WHEN was = 'running' THEN lease_claim_id END,
           CASE WHEN was = 'running' THEN claimed_at END,
           CASE WHEN was = 'running' THEN lease_extensions END,
           'CANCELLED', $2, $3
    FROM changed
  )`;

/**
 * JobCancel: pending -> cancelled, or running -> cancelled with the lease token bumped, so the
 * worker holding the job is fenced out: its next renewal, completion, failure or effect write is
 * refused (and its signal aborts when the renewal is). Locks the job row (FOR UPDATE, waiting for
 * an in-flight transition) to read the claim it ends; appends a `cancelled` event (who, why, and
 * the claim it ended) in the same statement. A job in another state is left alone and its status
 * returned, so the caller can say why; a succeeded job is found in finished_jobs. Primary-key lookups.
 * A cancelled job leaves its ordering key's line (a gap does not block: when it was the head, the
 * next job becomes claimable in this statement), and a running one gives back its per-key slot.
 * A job someone waits for is announced on $5 (finish-notices.ts).
 * A cancelled flow node counts as a dead parent for its children: their onParentDead policy applies
 * in this statement (flow-release.ts).
 */
const JobCancel = defineStatement(
  'cancel_job',
  (s) => `
  WITH RECURSIVE target AS (
    SELECT id, status, lease_owner, lease_token, lease_claim_id, claimed_at, lease_extensions,
           attempt_count, holds_key_slot
    FROM ${s}.jobs
    WHERE id = $1
    FOR UPDATE
  ),
  changed AS (
    UPDATE ${s}.jobs AS j
    ${cancelledSet('$3')}
    FROM target
    WHERE j.id = target.id AND j.status IN ('pending', 'running')
    RETURNING j.id, j.queue_name, target.status AS was, target.lease_owner, target.lease_token,
              target.lease_claim_id, target.claimed_at, target.lease_extensions, target.attempt_count,
              j.ordering_key, j.concurrency_key, target.holds_key_slot AND target.status = 'running' AS holds_key_slot,
              j.notify_on_finish, j.has_children
  ),
  ${cancelledEffects(s)},
  ${finishNoticesCte('changed', 'notify_on_finish', '$5')}
  SELECT target.status::text AS status, changed.id IS NOT NULL AS cancelled,
         ${orderingRepairNeeded()} AS repair, ${orderingWakeups('$4')} AS woken,
         ${finishNoticesSent()} AS announced, ${flowWakeups('$4')} AS flow_woken
  FROM target LEFT JOIN changed USING (id)
  UNION ALL
  SELECT 'succeeded', false, '{}', 0, 0, 0 FROM ${s}.finished_jobs WHERE id = $1`,
);

/** What cancel found: the job's status before (null: no such job) and whether it cancelled it. */
export async function cancelJob(
  db: Queryable,
  schema: string,
  id: string,
  params: { actor: string | null; reason: string },
): Promise<{ status: string | null; cancelled: boolean }> {
  const rows = await run<{ status: string; cancelled: boolean; repair: string[] }>(db, JobCancel(schema), [
    id,
    params.actor,
    params.reason,
    wakeupChannel(schema),
    finishedChannel(schema),
  ]);
  const row = rows[0];
  if (row && row.repair.length > 0) await repairOrderingKeys(db, schema, row.repair, row.repair.length);
  return row ? { status: row.status, cancelled: row.cancelled } : { status: null, cancelled: false };
}

/**
 * JobCancelListed: pending/running -> cancelled for the listed ids that are still live, at most one
 * per ordering key per statement (the key's latest first, so a key's waiting jobs go before its
 * head and none is released to run; the ordering CTE may touch a key row once per statement).
 * Jobs locked elsewhere are skipped (SKIP LOCKED). Same effects as JobCancel for each: a running
 * job's token is bumped (its worker is fenced out), its key slot given back, a `cancelled` event
 * with actor $2 and reason $3, and a job someone waits for is announced on $5 (as JobCancel does).
 * Returns how many it cancelled, how many listed jobs remain live
 * (the caller repeats the statement for them), and keys to repair. Primary-key lookups.
 */
const JobCancelListed = defineStatement(
  'cancel_listed',
  (s) => `
  WITH RECURSIVE locked AS (
    SELECT id, status, queue_name, ordering_key, lease_owner, lease_token, lease_claim_id, claimed_at,
           lease_extensions, attempt_count, holds_key_slot
    FROM ${s}.jobs
    WHERE id = ANY($1::bigint[]) AND status IN ('pending', 'running')
    ORDER BY id
    FOR UPDATE SKIP LOCKED
  ),
  target AS (
    SELECT DISTINCT ON (coalesce(queue_name || chr(31) || ordering_key, id::text)) *
    FROM locked
    ORDER BY coalesce(queue_name || chr(31) || ordering_key, id::text), id DESC
  ),
  changed AS (
    UPDATE ${s}.jobs AS j
    ${cancelledSet('$3')}
    FROM target
    WHERE j.id = target.id AND j.status IN ('pending', 'running')
    RETURNING j.id, j.queue_name, target.status AS was, target.lease_owner, target.lease_token,
              target.lease_claim_id, target.claimed_at, target.lease_extensions, target.attempt_count,
              j.ordering_key, j.concurrency_key, target.holds_key_slot AND target.status = 'running' AS holds_key_slot,
              j.notify_on_finish, j.has_children
  ),
  ${cancelledEffects(s)},
  ${finishNoticesCte('changed', 'notify_on_finish', '$5')}
  SELECT (SELECT count(*) FROM changed)::int AS cancelled,
         (SELECT count(*) FROM locked)::int - (SELECT count(*) FROM changed)::int AS left_over,
         ${orderingRepairNeeded()} AS repair, ${orderingWakeups('$4')} AS woken,
         ${finishNoticesSent()} AS announced, ${flowWakeups('$4')} AS flow_woken`,
);

/**
 * Cancels the listed jobs that are still pending or running, repeating the statement while jobs
 * of one ordering key remain (one per key per statement); returns how many it cancelled.
 */
export async function cancelListed(
  db: Queryable,
  schema: string,
  ids: readonly string[],
  params: { actor: string | null; reason: string },
): Promise<number> {
  let total = 0;
  for (;;) {
    const rows = await run<{ cancelled: number; left_over: number; repair: string[] }>(
      db,
      JobCancelListed(schema),
      [ids, params.actor, params.reason, wakeupChannel(schema), finishedChannel(schema)],
    );
    const row = rows[0];
    if (!row) return total;
    if (row.repair.length > 0) await repairOrderingKeys(db, schema, row.repair, row.repair.length);
    total += row.cancelled;
    if (row.cancelled === 0 || row.left_over === 0) return total;
  }
}
