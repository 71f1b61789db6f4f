import { defineStatement, type Queryable, run } from '../db.js';

// A node's status as read back: the live row's, 'succeeded' from its finished record, or 'removed'
// once retention took both. A pending child still waiting for parents reads 'waiting', or 'blocked'
// when one of the parents it waits for is dead or cancelled (`n` the node, `j` its live row).
const NODE_STATUS = (s: string) => `CASE
      WHEN j.id IS NOT NULL AND j.status = 'pending' AND j.waiting_parents > 0 THEN
        CASE WHEN EXISTS (
          SELECT 1 FROM ${s}.job_dependencies AS d
          JOIN ${s}.jobs AS p ON p.id = d.parent_id
          WHERE d.child_id = n.job_id AND NOT d.resolved AND p.status IN ('dead', 'cancelled'))
        THEN 'blocked' ELSE 'waiting' END
      WHEN j.id IS NOT NULL THEN j.status::text
      WHEN fj.id IS NOT NULL THEN 'succeeded'
      ELSE 'removed' END`;

/**
 * FlowNodesRead: every node of the flow holding job $1, in job id order: ref, queue, status (see
 * NODE_STATUS), onParentDead, the refs it depends on, when it finished and its last error code.
 * Read-only. The flow is found by flow_nodes' primary key, its nodes through (flow_id, ref), each
 * job by primary key in jobs or finished_jobs, edges through job_dependencies_child_idx.
 */
const FlowNodesRead = defineStatement(
  'read_flow_nodes',
  (s) => `
  SELECT fl.id::text AS flow_id, fl.created_at, n.job_id::text AS id, n.ref, n.on_parent_dead,
         coalesce(j.queue_name, fj.queue_name) AS queue_name,
         ${NODE_STATUS(s)} AS status,
         coalesce(j.waiting_parents, 0) AS waiting_parents,
         coalesce((SELECT array_agg(p.ref ORDER BY p.job_id)
                   FROM ${s}.job_dependencies AS d
                   JOIN ${s}.flow_nodes AS p ON p.job_id = d.parent_id
                   WHERE d.child_id = n.job_id), '{}') AS depends_on,
         coalesce(j.finished_at, fj.finished_at) AS finished_at, j.last_error_code
  FROM ${s}.flow_nodes AS me
  JOIN ${s}.flows AS fl ON fl.id = me.flow_id
  JOIN ${s}.flow_nodes AS n ON n.flow_id = fl.id
  LEFT JOIN ${s}.jobs AS j ON j.id = n.job_id
  LEFT JOIN ${s}.finished_jobs AS fj ON fj.id = n.job_id AND j.id IS NULL
  WHERE me.job_id = $1
  ORDER BY n.job_id`,
);

/** A node as read back. */
export interface FlowNodeRow {
  flow_id: string;
  created_at: Date;
  id: string;
  ref: string;
  on_parent_dead: 'block' | 'cancel' | 'run';
  queue_name: string | null;
  status: string;
  waiting_parents: number;
  depends_on: string[];
  finished_at: Date | null;
  last_error_code: string | null;
}

/** Reads every node of the flow holding `jobId` (empty: the job is in no flow, or is gone). */
export function readFlowNodes(db: Queryable, schema: string, jobId: string): Promise<FlowNodeRow[]> {
  return run<FlowNodeRow>(db, FlowNodesRead(schema), [jobId]);
}

/**
 * JobParentsRead: the parents of job $1, in id order: ref, status ('succeeded' from the finished
 * record, the live row's otherwise, 'removed' once retention took it) and result (the handler's
 * return value, finished_jobs.result; null unless succeeded). Read-only; job_dependencies_child_idx,
 * then primary keys.
 */
const JobParentsRead = defineStatement(
  'read_job_parents',
  (s) => `
  SELECT d.parent_id::text AS id, n.ref,
         coalesce(j.status::text, CASE WHEN fj.id IS NOT NULL THEN 'succeeded' END, 'removed') AS status,
         fj.result
  FROM ${s}.job_dependencies AS d
  JOIN ${s}.flow_nodes AS n ON n.job_id = d.parent_id
  LEFT JOIN ${s}.jobs AS j ON j.id = d.parent_id
  LEFT JOIN ${s}.finished_jobs AS fj ON fj.id = d.parent_id
  WHERE d.child_id = $1
  ORDER BY d.parent_id`,
);

/** A parent as job.parents() returns it. */
export interface ParentRow {
  id: string;
  ref: string;
  status: string;
  result: unknown;
}

/** Reads the parents of `jobId` (empty for a job without any). */
export function readParents(db: Queryable, schema: string, jobId: string): Promise<ParentRow[]> {
  return run<ParentRow>(db, JobParentsRead(schema), [jobId]);
}

/**
 * BlockedFlowList: flows stalled on a dead or cancelled job, one row per such job that still holds
 * back at least one pending child, longest stalled first, at most $1. Terminal jobs are read through
 * jobs_terminal_finished_idx (few), the rest by primary keys and job_dependencies' primary key.
 * The job's columns are grouped by name: jobs has no primary key since its lanes (018), so
 * PostgreSQL no longer infers them from j.id.
 */
const BlockedFlowList = defineStatement(
  'list_blocked_flows',
  (s) => `
  SELECT n.flow_id::text AS flow_id, j.id::text AS job_id, n.ref, j.queue_name, j.status::text AS status,
         j.finished_at AS blocked_since, j.last_error_code,
         count(*)::int AS blocked_children
  FROM ${s}.jobs AS j
  JOIN ${s}.flow_nodes AS n ON n.job_id = j.id
  JOIN ${s}.job_dependencies AS d ON d.parent_id = j.id AND NOT d.resolved
  JOIN ${s}.jobs AS c ON c.id = d.child_id AND c.status = 'pending'
  WHERE j.finished_at IS NOT NULL
    AND j.status IN ('dead', 'cancelled')
    AND j.has_children
  GROUP BY n.flow_id, j.id, n.ref, j.queue_name, j.status, j.finished_at, j.last_error_code
  ORDER BY j.finished_at, j.id
  LIMIT $1`,
);

/** A stalled flow's dead (or cancelled) job as listed. */
export interface BlockedFlowRow {
  flow_id: string;
  job_id: string;
  ref: string;
  queue_name: string;
  status: string;
  blocked_since: Date;
  last_error_code: string | null;
  blocked_children: number;
}

/** Lists flows stalled on a dead or cancelled job. */
export function listBlockedFlows(db: Queryable, schema: string, limit: number): Promise<BlockedFlowRow[]> {
  return run<BlockedFlowRow>(db, BlockedFlowList(schema), [limit]);
}
