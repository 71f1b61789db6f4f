import type { LeaseholdContext } from '../../context/context.js';
import { assertPayloadMatches } from '../../runtime/run/payload-schema.js';
import type { AnyTask } from '../../runtime/task.js';
import { ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { assertQueueName, MAX_ENQUEUE_MANY_BYTES } from '../../shared/validation.js';
import type { NewFlowNode } from '../../storage/flows/flows.js';
import { newJob } from './enqueue.js';

/** Most jobs in one flow. */
export const MAX_FLOW_NODES = 20_000;
/** Most dependency edges in one flow (a fan-out then fan-in of 10,000 jobs needs 20,000). */
export const MAX_FLOW_EDGES = 50_000;
/** Most payload JSON bytes in one flow, all nodes together (as for one enqueueMany call). */
export const MAX_FLOW_BYTES = MAX_ENQUEUE_MANY_BYTES;
/** Longest ref. */
export const MAX_FLOW_REF = 200;

/** What a child does when one of its parents dies (or is cancelled). */
export type OnParentDead = 'block' | 'cancel' | 'run';

/** One job of `lh.enqueueFlow(nodes)`. */
export interface FlowNode {
  /** The caller's name for this job within the flow (1 to 200 characters, unique in the flow). */
  ref: string;
  /** The task to run (its schema checks the payload); or give `queue`. */
  task?: AnyTask;
  /** The queue to enqueue to; or give `task`. */
  queue?: string;
  payload?: unknown;
  /** Refs of the jobs that must succeed before this one may run. */
  dependsOn?: readonly string[];
  /** When a parent dies or is cancelled: 'block' (default), 'cancel' (with descendants) or 'run'. */
  onParentDead?: OnParentDead;
  priority?: number;
  runAt?: Date;
  delayMs?: number;
  maxAttempts?: number;
  concurrencyKey?: string;
}

const NODE_FIELDS: readonly (keyof FlowNode)[] = [
  'ref',
  'task',
  'queue',
  'payload',
  'dependsOn',
  'onParentDead',
  'priority',
  'runAt',
  'delayMs',
  'maxAttempts',
  'concurrencyKey',
];
const POLICIES: readonly OnParentDead[] = ['block', 'cancel', 'run'];

/**
 * Checks a flow (shape, refs, bounds, acyclicity, task payloads) and turns it into the rows and
 * edges the insert takes; throws a ValidationError naming the first problem, before any write.
 */
export async function validateFlow(
  context: LeaseholdContext,
  nodes: readonly FlowNode[],
): Promise<{ rows: NewFlowNode[]; edges: [number, number][]; refs: string[] }> {
  if (!Array.isArray(nodes) || nodes.length === 0 || nodes.length > MAX_FLOW_NODES) {
    throw new ValidationError('nodes', `must be an array of 1 to ${MAX_FLOW_NODES} jobs`);
  }
  const index = new Map<string, number>();
  for (const [i, node] of nodes.entries()) {
    const field = `nodes[${i}]`;
    if (typeof node !== 'object' || node === null) throw new ValidationError(field, 'must be an object');
    rejectUnknownOptions(node, NODE_FIELDS, field);
    const ref = node.ref;
    if (typeof ref !== 'string' || ref.length === 0 || ref.length > MAX_FLOW_REF) {
      throw new ValidationError(`${field}.ref`, `must be a string of 1 to ${MAX_FLOW_REF} characters`);
    }
    if (index.has(ref)) throw new ValidationError(`${field}.ref`, `"${ref}" is used by another node`);
    index.set(ref, i);
  }
  const edges: [number, number][] = [];
  const parents = new Array<number>(nodes.length).fill(0);
  const children: number[][] = nodes.map(() => []);
  for (const [i, node] of nodes.entries()) {
    const field = `nodes[${i}].dependsOn`;
    if (node.dependsOn === undefined) continue;
    if (!Array.isArray(node.dependsOn)) throw new ValidationError(field, 'must be an array of refs');
    const seen = new Set<string>();
    for (const ref of node.dependsOn) {
      const parent = typeof ref === 'string' ? index.get(ref) : undefined;
      if (parent === undefined) {
        throw new ValidationError(field, `names an unknown ref ${JSON.stringify(String(ref)).slice(0, 210)}`);
      }
      if (seen.has(ref)) throw new ValidationError(field, `lists "${ref}" twice`);
      seen.add(ref);
      if (edges.length >= MAX_FLOW_EDGES) {
        throw new ValidationError('nodes', `hold more than ${MAX_FLOW_EDGES} dependencies; split the flow`);
      }
      edges.push([parent, i]);
      parents[i] = (parents[i] as number) + 1;
      (children[parent] as number[]).push(i);
    }
  }
  assertAcyclic(nodes, parents, children);
  const rows: NewFlowNode[] = [];
  let bytes = 0;
  for (const [i, node] of nodes.entries()) {
    const field = `nodes[${i}]`;
    const queue = await nodeQueue(node, field);
    const policy = node.onParentDead ?? 'block';
    if (!POLICIES.includes(policy)) {
      throw new ValidationError(`${field}.onParentDead`, "must be 'block', 'cancel' or 'run'");
    }
    const { ref, task: _task, queue: _queue, dependsOn: _dependsOn, onParentDead: _policy, ...item } = node;
    const job = newJob(context, item, field);
    bytes += Buffer.byteLength(job.payloadJson, 'utf8');
    if (bytes > MAX_FLOW_BYTES) {
      throw new ValidationError(
        'nodes',
        `hold over ${MAX_FLOW_BYTES} bytes of payload JSON, the limit for one flow`,
      );
    }
    rows.push({
      ...job,
      queue,
      ref,
      onParentDead: policy,
      parents: parents[i] as number,
      hasChildren: (children[i] as number[]).length > 0,
    });
  }
  return { rows, edges, refs: nodes.map((node) => node.ref) };
}

// The queue of a node: its task's (payload checked by the task's schema) or its own.
async function nodeQueue(node: FlowNode, field: string): Promise<string> {
  if (node.task !== undefined) {
    if (node.queue !== undefined) throw new ValidationError(field, 'give task or queue, not both');
    const task = node.task;
    if (typeof task !== 'object' || task === null || typeof task.name !== 'string' || !task.queue) {
      throw new ValidationError(`${field}.task`, 'must be a task made by defineTask');
    }
    if (task.schema !== undefined) {
      await assertPayloadMatches(task.name, task.schema, node.payload, `${field}.payload`);
    }
    assertQueueName(task.name, `${field}.task`);
    return task.name;
  }
  if (node.queue === undefined) throw new ValidationError(field, 'needs a task or a queue');
  assertQueueName(node.queue, `${field}.queue`);
  return node.queue;
}

// Kahn's algorithm: every node must be reachable by repeatedly taking nodes without parents left.
function assertAcyclic(nodes: readonly FlowNode[], parents: readonly number[], children: number[][]): void {
  const left = [...parents];
  const ready: number[] = [];
  for (const [i, n] of left.entries()) if (n === 0) ready.push(i);
  let taken = 0;
  while (ready.length > 0) {
    const i = ready.pop() as number;
    taken++;
    for (const child of children[i] as number[]) {
      left[child] = (left[child] as number) - 1;
      if (left[child] === 0) ready.push(child);
    }
  }
  if (taken === nodes.length) return;
  const stuck = left.flatMap((n, i) => (n > 0 ? [nodes[i]?.ref as string] : [])).slice(0, 5);
  throw new ValidationError(
    'nodes',
    `have a dependency cycle (through ${stuck.map((ref) => JSON.stringify(ref)).join(', ')})`,
  );
}
