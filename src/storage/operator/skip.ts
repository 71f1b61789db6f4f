import { defineStatement, type Queryable, run } from '../db.js';
import { wakeupChannel } from '../jobs/enqueue.js';
import {
  orderingAdvanceCte,
  orderingRepairNeeded,
  orderingWakeups,
  repairOrderingKeys,
} from '../queues/ordering.js';

/**
 * JobSkip: dead -> cancelled, by an operator's decision to give up on the job so that its ordering
 * key moves on: the key's next job becomes claimable in this statement. Locks the job row
 * (FOR UPDATE, waiting for an in-flight replay); appends a `key_skipped` event (who, why) in the same
 * statement. A job in another state is left alone and its status returned. Primary-key lookups.
 */
const JobSkip = defineStatement(
  'skip_job',
  (s) => `
  WITH target AS (
    SELECT id, status FROM ${s}.jobs WHERE id = $1 FOR UPDATE
  ),
  changed AS (
    UPDATE ${s}.jobs AS j
    SET status = 'cancelled',
        finished_at = now(),
        last_error_code = 'SKIPPED',
        last_error_message = $3
    FROM target
    WHERE j.id = target.id AND j.status = 'dead'
    RETURNING j.id, j.queue_name, j.ordering_key
  ),
  recorded AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, status_after, error_code, actor, reason)
    SELECT id, queue_name, 'key_skipped', 'cancelled', 'SKIPPED', $2, $3
    FROM changed
  ),
  ${orderingAdvanceCte(s, 'changed')}
  SELECT target.status::text AS status, changed.id IS NOT NULL AS skipped,
         ${orderingRepairNeeded()} AS repair, ${orderingWakeups('$4')} AS woken
  FROM target LEFT JOIN changed USING (id)
  UNION ALL
  SELECT 'succeeded', false, '{}', 0 FROM ${s}.finished_jobs WHERE id = $1`,
);

/** What skip found: the job's status before (null: no such job) and whether it skipped it. */
export async function skipJob(
  db: Queryable,
  schema: string,
  id: string,
  params: { actor: string | null; reason: string },
): Promise<{ status: string | null; skipped: boolean }> {
  const rows = await run<{ status: string; skipped: boolean; repair: string[] }>(db, JobSkip(schema), [
    id,
    params.actor,
    params.reason,
    wakeupChannel(schema),
  ]);
  const row = rows[0];
  if (!row) return { status: null, skipped: false };
  if (row.repair.length > 0) await repairOrderingKeys(db, schema, row.repair, row.repair.length);
  return { status: row.status, skipped: row.skipped };
}
