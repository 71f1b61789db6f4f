import { defineStatement, type Queryable, run } from '../db.js';
import type { FenceRef } from '../fence.js';

/**
 * TransactionTimeoutsSet: bounds the handler's own transaction (`job.transaction`) by the lease time
 * left: `statement_timeout` and `idle_in_transaction_session_timeout`, both `SET LOCAL` (they end
 * with the transaction, so a pooled or PgBouncer connection keeps its own settings). Moves no job,
 * takes no lock, reads no table.
 */
const TransactionTimeoutsSet = defineStatement(
  'transaction_timeouts',
  () => `
  SELECT set_config('statement_timeout', $1, true),
         set_config('idle_in_transaction_session_timeout', $1, true)`,
);

/** Bounds the current transaction's statements and idle time to `ms` milliseconds. */
export async function setTransactionTimeouts(db: Queryable, ms: number): Promise<void> {
  await run(db, TransactionTimeoutsSet(''), [String(Math.max(1, Math.floor(ms)))]);
}

/**
 * RefusalRecord: counts one completion refused inside a handler's own transaction, after that
 * transaction rolled back (taking the refusal the fenced statement had counted with it). Same rows
 * as `refusals.ts` writes in every fenced statement: +1 on (queue, 'complete') in lease_refusals
 * (upsert on its primary key) and one `refused` event in job_events. Moves no job.
 */
export const RefusalRecord = defineStatement(
  'record_refusal',
  (s) => `
  WITH refused AS (
    INSERT INTO ${s}.lease_refusals AS r (queue_name, operation, refused_count, last_refused_at)
    VALUES ($1, 'complete', 1, now())
    ON CONFLICT (queue_name, operation) DO UPDATE
      SET refused_count = r.refused_count + 1, last_refused_at = excluded.last_refused_at
  )
  INSERT INTO ${s}.job_events (job_id, queue_name, kind, lease_owner, lease_token, detail)
  VALUES ($2, $1, 'refused', $3, $4, '{"operation":"complete"}'::jsonb)`,
);

/** Records one refused completion of `ref` (outside the rolled-back transaction that carried it). */
export async function recordRefusedCompletion(db: Queryable, schema: string, ref: FenceRef): Promise<void> {
  await run(db, RefusalRecord(schema), [ref.queue, ref.jobId, ref.owner, ref.token]);
}
