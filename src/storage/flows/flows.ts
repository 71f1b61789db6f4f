import { defineStatement, type Queryable, run } from '../db.js';
import { wakeupChannel } from '../jobs/enqueue.js';

/**
 * FlowInsert: (nothing) -> pending, for a whole flow in one statement (all or nothing): draws one
 * job id per node from the jobs sequence (`drawn`, in node order, so ids ascend with the nodes),
 * then inserts the flow row, every job, its node row (ref, onParentDead) and every edge. Edges
 * arrive as 1-based node positions ($12 parents, $13 children), never as job ids: the statement
 * (and the producer's function that runs it, storage/roles/functions.ts) can only link the jobs it just
 * created, and no caller can choose a job's id (issue 17: a chosen id would collide with the next
 * enqueue of everyone else). Ids drawn by a flow that is then refused or rolled back are skipped, as
 * any failed insert's are. Every column travels as an array, zipped by unnest with the drawn ids,
 * and edges look their ids up by subscript in the one-row `drawn`: no join, so the plan stays cheap
 * whatever the graph's size (joining edges to nodes here made the planner expect millions of rows
 * and spend seconds compiling it with JIT). A node with parents is inserted with waiting_parents
 * set to their number: outside jobs_claimable_idx until the statements accepting its parents'
 * completions bring it to 0. A node with children carries has_children, which is what lets those
 * statements find the edges; each edge carries its child's queue (019), by which the release finds
 * the child in its queue's part of jobs (flow-release.ts). Notifies the queues of the nodes claimable at once (delivered on
 * commit, folded per transaction). Returns the flow id and the job ids in node order.
 */
export const FlowInsert = defineStatement(
  'enqueue_flow',
  (s) => `
  WITH drawn AS MATERIALIZED (
    SELECT array_agg(nextval(pg_get_serial_sequence('${s}.jobs', 'id')) ORDER BY g) AS ids
    FROM generate_series(1, cardinality($1::text[])) AS g
  ),
  flow AS (
    INSERT INTO ${s}.flows (node_count)
    VALUES (cardinality($1::text[]))
    RETURNING id
  ),
  inserted AS (
    INSERT INTO ${s}.jobs (id, queue_name, payload, priority, available_at, max_attempts, concurrency_key,
                           waiting_parents, has_children)
    OVERRIDING SYSTEM VALUE
    SELECT i.id, i.queue_name, i.payload::jsonb, i.priority,
           coalesce(i.run_at, now() + i.delay_ms * interval '1 millisecond'), i.max_attempts,
           i.concurrency_key, i.waiting_parents, i.has_children
    FROM drawn CROSS JOIN LATERAL
         unnest(drawn.ids, $1::text[], $2::text[], $3::integer[], $4::timestamptz[],
                $5::double precision[], $6::integer[], $7::text[], $9::integer[], $10::boolean[])
      AS i(id, queue_name, payload, priority, run_at, delay_ms, max_attempts, concurrency_key,
           waiting_parents, has_children)
    RETURNING id
  ),
  nodes AS (
    INSERT INTO ${s}.flow_nodes (job_id, flow_id, ref, on_parent_dead)
    SELECT n.id, flow.id, n.ref, n.on_parent_dead
    FROM drawn CROSS JOIN LATERAL unnest(drawn.ids, $8::text[], $11::text[]) AS n(id, ref, on_parent_dead)
    CROSS JOIN flow
  ),
  edges AS (
    INSERT INTO ${s}.job_dependencies (parent_id, child_id, flow_id, child_queue)
    SELECT drawn.ids[e.parent_at], drawn.ids[e.child_at], flow.id, ($1::text[])[e.child_at]
    FROM unnest($12::integer[], $13::integer[]) AS e(parent_at, child_at) CROSS JOIN drawn CROSS JOIN flow
  ),
  woken AS (
    SELECT count(pg_notify($14, q.queue_name)) AS n
    FROM (SELECT DISTINCT queue_name
          FROM unnest($1::text[], $9::integer[]) AS r(queue_name, waiting_parents)
          WHERE waiting_parents = 0) AS q
  )
  SELECT flow.id::text AS flow_id, drawn.ids::text[] AS ids, (SELECT count(*) FROM inserted)::int AS inserted,
         woken.n AS woken
  FROM flow, woken, drawn`,
);

/** One validated node of a flow, ready to insert. */
export interface NewFlowNode {
  queue: string;
  payloadJson: string;
  priority: number;
  runAt: Date | null;
  delayMs: number;
  maxAttempts: number;
  concurrencyKey: string | null;
  ref: string;
  onParentDead: 'block' | 'cancel' | 'run';
  /** How many parents it waits for. */
  parents: number;
  hasChildren: boolean;
}

/**
 * Inserts a flow in one statement (all or nothing); returns the flow id and the job ids in node
 * order. `edges` are [parent index, child index] pairs into `nodes` (0-based).
 */
export async function insertFlow(
  db: Queryable,
  schema: string,
  nodes: readonly NewFlowNode[],
  edges: readonly (readonly [number, number])[],
): Promise<{ flowId: string; ids: string[] }> {
  const rows = await run<{ flow_id: string; ids: string[] }>(db, FlowInsert(schema), [
    nodes.map((n) => n.queue),
    nodes.map((n) => n.payloadJson),
    nodes.map((n) => n.priority),
    nodes.map((n) => n.runAt),
    nodes.map((n) => n.delayMs),
    nodes.map((n) => n.maxAttempts),
    nodes.map((n) => n.concurrencyKey),
    nodes.map((n) => n.ref),
    nodes.map((n) => n.parents),
    nodes.map((n) => n.hasChildren),
    nodes.map((n) => n.onParentDead),
    edges.map((e) => e[0] + 1),
    edges.map((e) => e[1] + 1),
    wakeupChannel(schema),
  ]);
  return { flowId: rows[0]?.flow_id as string, ids: rows[0]?.ids ?? [] };
}

/**
 * FlowPruneBatch: removes flows none of whose nodes has a record left (in jobs or finished_jobs),
 * their node and edge rows going with them (ON DELETE CASCADE). Examines at most $1 flows above id
 * $2, in id order (primary key), each node looked up by primary key; locks the flow rows it removes
 * (SKIP LOCKED: concurrent passes share the work). A flow is kept while any of its records is, so
 * getFlow shows the graph for as long as retention keeps its jobs.
 */
const FlowPruneBatch = defineStatement(
  'prune_flows',
  (s) => `
  WITH examined AS (
    SELECT f.id FROM ${s}.flows AS f
    WHERE f.id > $2::bigint
    ORDER BY f.id
    LIMIT $1
  ),
  doomed AS (
    SELECT f.id FROM ${s}.flows AS f
    WHERE f.id IN (SELECT id FROM examined)
      AND NOT EXISTS (
        SELECT 1 FROM ${s}.flow_nodes AS n
        WHERE n.flow_id = f.id
          AND (EXISTS (SELECT 1 FROM ${s}.jobs AS j WHERE j.id = n.job_id)
               OR EXISTS (SELECT 1 FROM ${s}.finished_jobs AS fj WHERE fj.id = n.job_id)))
    FOR UPDATE OF f SKIP LOCKED
  ),
  removed AS (
    DELETE FROM ${s}.flows AS f USING doomed WHERE f.id = doomed.id RETURNING f.id
  )
  SELECT (SELECT count(*) FROM examined)::int AS seen,
         (SELECT count(*) FROM removed)::int AS removed,
         (SELECT max(id) FROM examined)::text AS last_id`,
);

/** Prunes one batch of flows whose records are all gone; `next` is null once the scan is done. */
export async function pruneFlowsBatch(
  db: Queryable,
  schema: string,
  limit: number,
  afterId: string,
): Promise<{ seen: number; removed: number; next: string | null }> {
  const rows = await run<{ seen: number; removed: number; last_id: string | null }>(
    db,
    FlowPruneBatch(schema),
    [limit, afterId],
  );
  const row = rows[0];
  const seen = row?.seen ?? 0;
  return { seen, removed: row?.removed ?? 0, next: seen >= limit ? (row?.last_id ?? null) : null };
}
