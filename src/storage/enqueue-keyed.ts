import { defineStatement, type Queryable, run } from './db.js';
import { hasFairnessKey, type NewJob, wakeupChannel } from './enqueue.js';

/**
 * JobInsertKeyed: (nothing) -> pending, unless queue $1 already holds a job under idempotency key
 * $8: then nothing is inserted and that job's id comes back, with created = false.
 * The key row is claimed first, in job_keys (primary key (queue_name, key)), with the id the new
 * job would get. A concurrent insert of the same key waits on that index entry until the first
 * transaction ends; ON CONFLICT DO UPDATE (a no-op update) then locks and returns the committed
 * row, which a DO NOTHING plus a fallback SELECT in the same statement could not see (its snapshot
 * predates the other commit). So exactly one job is created, every caller gets its id, in one
 * statement, inside caller transactions too. The job row itself is inserted only when the key row
 * is new. Plain enqueue (no key) does none of this.
 */
const keyedText = (s: string, fair: boolean) => `
  WITH fresh AS (
    SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')) AS id
  ),
  key AS (
    INSERT INTO ${s}.job_keys AS k (queue_name, idempotency_key, job_id)
    SELECT $1, $8, fresh.id FROM fresh
    ON CONFLICT (queue_name, idempotency_key) DO UPDATE SET queue_name = k.queue_name
    RETURNING k.job_id
  ),
  inserted AS (
    INSERT INTO ${s}.jobs (id, queue_name, payload, priority, available_at, max_attempts, concurrency_key${fair ? ', fairness_key' : ''})
    OVERRIDING SYSTEM VALUE
    SELECT key.job_id, $1, $2::jsonb, $3,
           coalesce($4::timestamptz, now() + $5::double precision * interval '1 millisecond'), $6, $9${fair ? ', $10' : ''}
    FROM key, fresh
    WHERE key.job_id = fresh.id
    RETURNING id
  )
  SELECT key.job_id::text AS id, key.job_id = fresh.id AS created,
         (SELECT count(pg_notify($7, $1)) FROM inserted) AS notified
  FROM key, fresh`;

/** The keyed insert described above. */
export const JobInsertKeyed = defineStatement('enqueue_keyed', (s) => keyedText(s, false));
/** JobInsertKeyed with the job's fairness key ($10, 022): the plain one does not name the column. */
export const JobInsertKeyedFair = defineStatement('enqueue_keyed_fair', (s) => keyedText(s, true));

/** Inserts a job unless its key is taken; returns the id of the job holding the key. */
export async function insertKeyedJob(
  db: Queryable,
  schema: string,
  queue: string,
  job: NewJob,
  key: string,
): Promise<{ id: string; created: boolean }> {
  const values = [
    queue,
    job.payloadJson,
    job.priority,
    job.runAt,
    job.delayMs,
    job.maxAttempts,
    wakeupChannel(schema),
    key,
    job.concurrencyKey,
  ];
  const rows = hasFairnessKey(job)
    ? await run<{ id: string; created: boolean }>(db, JobInsertKeyedFair(schema), [
        ...values,
        job.fairnessKey,
      ])
    : await run<{ id: string; created: boolean }>(db, JobInsertKeyed(schema), values);
  const row = rows[0] as { id: string; created: boolean };
  return { id: row.id, created: row.created };
}
