import { defineStatement, type Queryable, run } from './db.js';

/**
 * QueueConfigure: creates or updates one queue's settings row. Each setting changes only when its
 * flag is true, so a call names just what it changes; a null value clears a setting back to its
 * default. Takes the queues row lock (primary key). A pause takes effect at the next claim
 * statement, which checks it; running jobs are not touched.
 */
const QueueConfigure = defineStatement(
  'configure_queue',
  (s) => `
  INSERT INTO ${s}.queues AS q (name, owner, dead_retention_ms, succeeded_retention_ms, paused)
  VALUES ($1, $3, $5, $7, coalesce($9, false))
  ON CONFLICT (name) DO UPDATE
    SET owner = CASE WHEN $2 THEN excluded.owner ELSE q.owner END,
        dead_retention_ms = CASE WHEN $4 THEN excluded.dead_retention_ms ELSE q.dead_retention_ms END,
        succeeded_retention_ms = CASE WHEN $6 THEN excluded.succeeded_retention_ms
                                      ELSE q.succeeded_retention_ms END,
        paused = CASE WHEN $8 THEN excluded.paused ELSE q.paused END,
        updated_at = now()
  RETURNING name, owner, dead_retention_ms::float8 AS dead_retention_ms,
            succeeded_retention_ms::float8 AS succeeded_retention_ms, paused, updated_at`,
);

/**
 * QueueSummaryList: per queue, live and dead counts, the age of the oldest claimable job, and its
 * settings; for every queue that has jobs or a settings row, by name, at most $1. Read-only, no
 * locks. It aggregates the jobs table (live work and kept terminal jobs only: succeeded jobs have
 * left it), so its cost grows with the backlog: an operator's command, not a metric to poll fast.
 */
const QueueSummaryList = defineStatement(
  'list_queues',
  (s) => `
  WITH counts AS (
    SELECT queue_name,
           count(*) FILTER (WHERE status = 'pending')::int AS pending,
           count(*) FILTER (WHERE status = 'running')::int AS running,
           count(*) FILTER (WHERE status = 'dead')::int AS dead,
           count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled,
           extract(epoch FROM now() - min(available_at) FILTER (
             WHERE status = 'pending' AND available_at <= now())) * 1000 AS oldest_claimable_ms
    FROM ${s}.jobs
    GROUP BY queue_name
  )
  SELECT coalesce(c.queue_name, q.name) AS name,
         coalesce(c.pending, 0) AS pending, coalesce(c.running, 0) AS running,
         coalesce(c.dead, 0) AS dead, coalesce(c.cancelled, 0) AS cancelled,
         c.oldest_claimable_ms::float8 AS oldest_claimable_ms,
         q.owner, coalesce(q.paused, false) AS paused,
         q.dead_retention_ms::float8 AS dead_retention_ms,
         q.succeeded_retention_ms::float8 AS succeeded_retention_ms
  FROM counts AS c
  FULL JOIN ${s}.queues AS q ON q.name = c.queue_name
  ORDER BY 1
  LIMIT $1`,
);

/** A queues row as returned. */
export interface QueueRow {
  name: string;
  owner: string | null;
  dead_retention_ms: number | null;
  succeeded_retention_ms: number | null;
  paused: boolean;
  updated_at: Date;
}

/** What to change; `undefined` leaves a setting as it is, `null` clears it. */
export interface QueueChanges {
  owner?: string | null;
  deadRetentionMs?: number | null;
  succeededRetentionMs?: number | null;
  paused?: boolean;
}

/** Creates or updates a queue's settings; returns the row. */
export async function configureQueue(
  db: Queryable,
  schema: string,
  queue: string,
  changes: QueueChanges,
): Promise<QueueRow> {
  const rows = await run<QueueRow>(db, QueueConfigure(schema), [
    queue,
    changes.owner !== undefined,
    changes.owner ?? null,
    changes.deadRetentionMs !== undefined,
    changes.deadRetentionMs ?? null,
    changes.succeededRetentionMs !== undefined,
    changes.succeededRetentionMs ?? null,
    changes.paused !== undefined,
    changes.paused ?? null,
  ]);
  return rows[0] as QueueRow;
}

/** A queue summary row. */
export interface QueueSummaryRow {
  name: string;
  pending: number;
  running: number;
  dead: number;
  cancelled: number;
  oldest_claimable_ms: number | null;
  owner: string | null;
  paused: boolean;
  dead_retention_ms: number | null;
  succeeded_retention_ms: number | null;
}

/** Lists queue summaries, by name, at most `limit`. */
export function listQueues(db: Queryable, schema: string, limit: number): Promise<QueueSummaryRow[]> {
  return run<QueueSummaryRow>(db, QueueSummaryList(schema), [limit]);
}
