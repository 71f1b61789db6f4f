import { defineStatement, type Queryable, run } from '../db.js';

/** A pending job as `leasehold/testing` shows it: id, payload and when it becomes claimable. */
export interface PendingJob {
  id: string;
  payload: unknown;
  availableAt: Date;
  priority: number;
}

/**
 * JobPendingList: reads (no lock, no change) the first $2 pending jobs of queue $1 by id, claimable
 * now or later, including jobs waiting behind their ordering key. For test assertions
 * (`expectEnqueued`) on a test's own small queues: no index serves this order for one queue
 * (jobs_claimable_idx leads with the queue, but leaves out jobs waiting behind a key), so the
 * planner filters and sorts; bounded by $2, and not meant for a production-sized queue.
 */
const JobPendingList = defineStatement(
  'list_pending',
  (s) => `
  SELECT id, payload, available_at, priority
  FROM ${s}.jobs
  WHERE queue_name = $1 AND status = 'pending'
  ORDER BY id
  LIMIT $2`,
);

/** The first `limit` pending jobs of `queue`, oldest first. */
export async function readPendingJobs(
  db: Queryable,
  schema: string,
  queue: string,
  limit: number,
): Promise<PendingJob[]> {
  const rows = await run<{ id: string; payload: unknown; available_at: Date; priority: number }>(
    db,
    JobPendingList(schema),
    [queue, limit],
  );
  return rows.map((row) => ({
    id: row.id,
    payload: row.payload,
    availableAt: row.available_at,
    priority: row.priority,
  }));
}

/**
 * SchemaDrop: drops a test schema and everything in it (`leasehold/testing`'s close). DDL takes no
 * parameters: the name is one Leasehold validated when the client was built, quoted here.
 */
export async function dropTestSchema(db: Queryable, quotedSchema: string): Promise<void> {
  await db.query({ text: `DROP SCHEMA IF EXISTS ${quotedSchema} CASCADE` });
}
