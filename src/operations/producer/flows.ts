import { connectionFor, type LeaseholdContext } from '../../context/context.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { assertJobId, optionalInt, optionsObject } from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import { listBlockedFlows, readFlowNodes } from '../../storage/flows/flow-read.js';
import { insertFlow } from '../../storage/flows/flows.js';
import { type FlowNode, type OnParentDead, validateFlow } from './flow-input.js';

export type { FlowNode, OnParentDead } from './flow-input.js';
export { MAX_FLOW_BYTES, MAX_FLOW_EDGES, MAX_FLOW_NODES } from './flow-input.js';

/** What `enqueueFlow` wrote. */
export interface EnqueueFlowResult {
  /** The flow's id (not a job id). */
  flowId: string;
  /** Each node's job id, by ref. */
  ids: Record<string, string>;
}

/**
 * `lh.enqueueFlow(nodes)`: validates the whole graph (refs, cycles, bounds, task payloads: a
 * ValidationError before any write), then writes it in one statement, all or nothing, joining the
 * caller's transaction with `client`.
 */
export async function enqueueFlow(
  context: LeaseholdContext,
  nodes: readonly FlowNode[],
  given?: { client?: Queryable },
): Promise<EnqueueFlowResult> {
  const options = optionsObject(given);
  rejectUnknownOptions(options, ['client'], 'options');
  const { rows, edges, refs } = await validateFlow(context, nodes);
  const db = connectionFor(context, options.client);
  const { flowId, ids } = await insertFlow(db, context.schema, rows, edges);
  return { flowId, ids: Object.fromEntries(refs.map((ref, i) => [ref, ids[i] as string])) };
}

/**
 * A node's status: a job's own ('pending', 'running', 'succeeded', 'dead', 'cancelled'), or
 * 'waiting' (parents unfinished), 'blocked' (a parent it waits for is dead or cancelled), 'removed'
 * (retention took its record).
 */
export type FlowNodeStatus =
  | 'waiting'
  | 'blocked'
  | 'pending'
  | 'running'
  | 'succeeded'
  | 'dead'
  | 'cancelled'
  | 'removed';

/** One node of a flow as `getFlow` returns it. */
export interface FlowNodeView {
  ref: string;
  /** The job's id. */
  id: string;
  /** Null once retention removed the job's record. */
  queue: string | null;
  status: FlowNodeStatus;
  /** Parents whose success it still waits for. */
  waitingParents: number;
  /** Refs of its parents. */
  dependsOn: string[];
  onParentDead: OnParentDead;
  finishedAt: Date | null;
  lastErrorCode: string | null;
}

/** A flow's graph with each node's status. */
export interface FlowView {
  flowId: string;
  createdAt: Date;
  /** In job id order (the order the nodes were given). */
  nodes: FlowNodeView[];
}

/** `lh.getFlow(id)`: the flow holding job `id`, or null (not in a flow, or pruned). */
export async function getFlow(
  context: LeaseholdContext,
  id: string | bigint | number,
): Promise<FlowView | null> {
  const jobId = assertJobId(id);
  const rows = await readFlowNodes(context.pool, context.schema, jobId);
  const first = rows[0];
  if (!first) return null;
  return {
    flowId: first.flow_id,
    createdAt: first.created_at,
    nodes: rows.map((row) => ({
      ref: row.ref,
      id: row.id,
      queue: row.queue_name,
      status: row.status as FlowNodeStatus,
      waitingParents: row.waiting_parents,
      dependsOn: row.depends_on,
      onParentDead: row.on_parent_dead,
      finishedAt: row.finished_at,
      lastErrorCode: row.last_error_code,
    })),
  };
}

/** A flow stalled on a dead or cancelled job. */
export interface BlockedFlow {
  flowId: string;
  /** The dead (or cancelled) job holding children back: replay it to resume the flow. */
  jobId: string;
  ref: string;
  queue: string;
  status: 'dead' | 'cancelled';
  /** When it died (or was cancelled). */
  blockedSince: Date;
  lastErrorCode: string | null;
  /** Pending children it holds back ('block' policy). */
  blockedChildren: number;
}

/** `lh.blockedFlows()`: flows stalled on a dead or cancelled job, longest stalled first. */
export async function blockedFlows(
  context: LeaseholdContext,
  given?: { limit?: number },
): Promise<BlockedFlow[]> {
  const options = optionsObject(given);
  rejectUnknownOptions(options, ['limit'], 'options');
  const limit = optionalInt(options.limit, 'limit', 1, 10_000, 100);
  const rows = await listBlockedFlows(context.pool, context.schema, limit);
  return rows.map((row) => ({
    flowId: row.flow_id,
    jobId: row.job_id,
    ref: row.ref,
    queue: row.queue_name,
    status: row.status as 'dead' | 'cancelled',
    blockedSince: row.blocked_since,
    lastErrorCode: row.last_error_code,
    blockedChildren: row.blocked_children,
  }));
}
