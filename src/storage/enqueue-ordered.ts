import { defineStatement, type Queryable, run } from './db.js';
import { batchColumns, hasFairnessKey, type NewJob, wakeupChannel } from './enqueue.js';

/**
 * Under the key row's lock (INSERT ... ON CONFLICT DO UPDATE reads the latest committed version),
 * a key with no head and nobody waiting is idle: the new job becomes its head; otherwise the job
 * waits behind it. A key with no head but waiting jobs is being repaired: new jobs wait too.
 * Shared with the scheduler's ScheduleFire (schedule-fire.ts), which takes keys the same way.
 */
export const TAKE_KEY = `
    ON CONFLICT (queue_name, ordering_key) DO UPDATE
      SET head_id = CASE WHEN k.head_id IS NULL AND k.waiting = 0 THEN excluded.head_id ELSE k.head_id END,
          waiting = CASE WHEN k.head_id IS NULL AND k.waiting = 0 THEN excluded.waiting
                         ELSE k.waiting + excluded.waiting + 1 END
    RETURNING k.ordering_key, k.head_id`;

/**
 * JobInsertOrdered: (nothing) -> pending, for jobs of queue $1 with ordering keys (jobs without a
 * key in the same batch are inserted as usual). Ids are drawn first, in input order; then each
 * key's row in ordering_keys is taken, in key order (so concurrent batches cannot deadlock), and
 * the key's first new job becomes its head if the key was idle. Every other job of the key is
 * inserted with awaits_predecessor set: outside jobs_claimable_idx until the statement finishing
 * the job ahead of it releases it. Two enqueues of one key serialise on the key row; a completion
 * of the key's head takes the same row lock. Notifies the queue's listeners on commit.
 */
const orderedText = (s: string, fair: boolean) => `
  WITH items AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')) AS id, i.*
    FROM ROWS FROM (
      unnest($2::text[]),
      unnest($3::integer[]),
      unnest($4::timestamptz[]),
      unnest($5::double precision[]),
      unnest($6::integer[]),
      unnest($8::text[]),
      unnest($9::text[])${fair ? ',\n      unnest($10::text[])' : ''}
    ) WITH ORDINALITY AS i(payload, priority, run_at, delay_ms, max_attempts, ordering_key, concurrency_key, ${fair ? 'fairness_key, ' : ''}ord)
    ORDER BY i.ord
  ),
  groups AS (
    SELECT ordering_key, min(id) AS first_id, count(*)::int AS n
    FROM items
    WHERE ordering_key IS NOT NULL
    GROUP BY ordering_key
  ),
  keys AS (
    INSERT INTO ${s}.ordering_keys AS k (queue_name, ordering_key, head_id, waiting)
    SELECT $1, g.ordering_key, g.first_id, g.n - 1
    FROM groups AS g
    ORDER BY g.ordering_key
    ${TAKE_KEY}
  ),
  inserted AS (
    INSERT INTO ${s}.jobs (id, queue_name, payload, priority, available_at, max_attempts,
                           ordering_key, concurrency_key, ${fair ? 'fairness_key, ' : ''}awaits_predecessor)
    OVERRIDING SYSTEM VALUE
    SELECT i.id, $1, i.payload::jsonb, i.priority,
           coalesce(i.run_at, now() + i.delay_ms * interval '1 millisecond'), i.max_attempts,
           i.ordering_key, i.concurrency_key, ${fair ? 'i.fairness_key, ' : ''}keys.head_id IS DISTINCT FROM i.id AND i.ordering_key IS NOT NULL
    FROM items AS i
    LEFT JOIN keys ON keys.ordering_key = i.ordering_key
    ORDER BY i.id
    RETURNING id
  )
  SELECT array_agg(id ORDER BY id)::text[] AS ids, pg_notify($7, $1)::text AS notified FROM inserted`;

/** The ordered insert described above. */
export const JobInsertOrdered = defineStatement('enqueue_ordered', (s) => orderedText(s, false));
/** JobInsertOrdered with each job's fairness key ($10, 022): the plain one does not name the column. */
export const JobInsertOrderedFair = defineStatement('enqueue_ordered_fair', (s) => orderedText(s, true));

/** Inserts jobs of one queue, some with ordering keys, in one statement; ids in input order. */
export async function insertOrderedJobs(
  db: Queryable,
  schema: string,
  queue: string,
  jobs: readonly NewJob[],
): Promise<string[]> {
  const values = [
    queue,
    ...batchColumns(jobs),
    wakeupChannel(schema),
    jobs.map((job) => job.orderingKey),
    jobs.map((job) => job.concurrencyKey),
  ];
  const rows = jobs.some(hasFairnessKey)
    ? await run<{ ids: string[] }>(db, JobInsertOrderedFair(schema), [
        ...values,
        jobs.map((job) => job.fairnessKey ?? null),
      ])
    : await run<{ ids: string[] }>(db, JobInsertOrdered(schema), values);
  return rows[0]?.ids ?? [];
}
