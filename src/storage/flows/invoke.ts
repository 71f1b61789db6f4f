import { defineStatement, type Queryable, run } from '../db.js';
import { type FenceRef, LEASE_FENCE, leaseValues } from '../fence.js';
import { refusalCountingCte } from '../refusals.js';

// `job.invoke` (migration 026; runtime/durable/invoke.ts). The invoking job and its child are joined by a
// flow edge read the other way round: the child is the edge's parent (`parent_id`, the job whose
// end is awaited, carrying has_children so that its claim picks the full completion), the invoking
// job its child (`child_id`, waiting_parents raised by one). Flows' release then wakes the invoking
// job, and only from a statement the child's fence accepted: its completion (flowReleaseCte), or
// its death or cancellation, for which an invoke edge (one of no flow: flow_id NULL) always takes
// the policy 'run' (flowParentDeadCtes). A plain job's claim, completion and failure are unchanged.

/**
 * InvokeBegin: (no step $6) -> step $6 named $7 of kind 'invoke', and a new job on queue $8
 * (payload $9, priority $10, max attempts $11) that the invoking job waits for, while the lease
 * $1..$5 is current (the job row locked FOR UPDATE: its waiting_parents is raised in the same
 * statement); an edge (of no flow) from the new job to the invoking one; a `step` event in the
 * invoking job's history; a wake-up on $12 for the new job's queue. The step is the key: a retried
 * job finds it recorded and inserts nothing (the id drawn for it is then skipped, as a rolled-back
 * insert's is). The edge, of no flow, goes from the new job to the invoking one. A refused write is counted (operation 'step') and writes nothing. Returns whether
 * the lease held, whether the step was recorded now, and the child's id as recorded.
 * Primary-key lookups on jobs and job_steps.
 */
export const InvokeBegin = defineStatement(
  'invoke_begin',
  (s) => `
  WITH input AS (
    SELECT $1::bigint AS id, $2::bigint AS token, $3::bigint AS claim_id, $4::text AS owner, $5::text AS queue_name
  ),
  changed AS (
    SELECT j.id, j.queue_name, j.attempt_count
    FROM ${s}.jobs AS j, input
    WHERE ${LEASE_FENCE}
    FOR UPDATE OF j
  ),
  ${refusalCountingCte(s, 'step')},
  drawn AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')) AS child_id FROM changed
  ),
  recorded AS (
    INSERT INTO ${s}.job_steps (job_id, seq, name, kind, result, attempt, lease_token)
    SELECT changed.id, $6, $7, 'invoke',
           jsonb_build_object('childId', drawn.child_id::text, 'queue', $8::text), changed.attempt_count, $2
    FROM changed, drawn
    ON CONFLICT (job_id, seq) DO NOTHING
    RETURNING job_id, name, attempt
  ),
  child AS (
    INSERT INTO ${s}.jobs (id, queue_name, payload, priority, available_at, max_attempts, has_children)
    OVERRIDING SYSTEM VALUE
    SELECT drawn.child_id, $8, $9::jsonb, $10, now(), $11, true
    FROM drawn WHERE EXISTS (SELECT FROM recorded)
    RETURNING id, queue_name
  ),
  edge AS (
    INSERT INTO ${s}.job_dependencies (parent_id, child_id, child_queue)
    SELECT child.id, changed.id, changed.queue_name FROM child, changed
  ),
  waiting AS (
    UPDATE ${s}.jobs AS j SET waiting_parents = j.waiting_parents + 1
    FROM changed
    WHERE j.id = changed.id AND j.queue_name = changed.queue_name AND EXISTS (SELECT FROM child)
  ),
  step_event AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, attempt, lease_owner, lease_token, lease_claim_id, detail)
    SELECT r.job_id, changed.queue_name, 'step', r.attempt, $4, $2, $3,
           jsonb_build_object('step', r.name, 'kind', 'invoke', 'childId', child.id::text, 'queue', child.queue_name)
    FROM recorded AS r, changed, child
  ),
  woken AS (SELECT count(pg_notify($12, queue_name)) AS n FROM child)
  SELECT (SELECT count(*) FROM changed) = 1 AS held, (SELECT count(*) FROM recorded) = 1 AS recorded,
         (SELECT id::text FROM child) AS child_id, (SELECT n FROM woken) AS woken`,
);

/**
 * InvokeOutcome: how invoked job $6 (of queue $7) stands, read for the invoking job while its lease
 * $1..$5 is current (locked FOR SHARE, as a step list is): 'succeeded' with its result from its
 * finished record, else its live row's status and last error ('removed' when retention took it).
 * A read: nothing written, no refusal counted. Primary-key lookups.
 */
export const InvokeOutcome = defineStatement(
  'invoke_outcome',
  (s) => `
  WITH input AS (
    SELECT $1::bigint AS id, $2::bigint AS token, $3::bigint AS claim_id, $4::text AS owner, $5::text AS queue_name
  ),
  changed AS (
    SELECT j.id FROM ${s}.jobs AS j, input WHERE ${LEASE_FENCE} FOR SHARE OF j
  )
  SELECT (SELECT count(*) FROM changed) = 1 AS held,
         coalesce(CASE WHEN f.id IS NOT NULL THEN 'succeeded' END, c.status::text, 'removed') AS status,
         f.result, c.last_error_code, c.last_error_class, c.last_error_message
  FROM (SELECT 1) AS one
  LEFT JOIN ${s}.finished_jobs AS f ON f.id = $6
  LEFT JOIN ${s}.jobs AS c ON c.queue_name = $7 AND c.id = $6`,
);

/** The invoke statements as SECURITY DEFINER functions of the worker role (functions.ts). */
export const INVOKE_FUNCTIONS = [
  {
    role: 'worker',
    statement: InvokeBegin,
    args: 'bigint, bigint, bigint, text, text, integer, text, text, jsonb, integer, integer, text',
    returns: 'held boolean, recorded boolean, child_id text, woken bigint',
  },
  {
    role: 'worker',
    statement: InvokeOutcome,
    args: 'bigint, bigint, bigint, text, text, bigint, text',
    returns:
      'held boolean, status text, result jsonb, last_error_code text, last_error_class text, last_error_message text',
  },
] as const;

/** What to invoke: the step's position and numbered name, and the child job to enqueue. */
export interface InvokeWrite {
  seq: number;
  key: string;
  queue: string;
  payloadJson: string;
  priority: number;
  maxAttempts: number;
  wakeupChannel: string;
}

/** Records the invoke step and enqueues its child (fenced); the child's id when recorded now. */
export async function beginInvoke(
  db: Queryable,
  schema: string,
  lease: FenceRef,
  write: InvokeWrite,
): Promise<{ held: boolean; recorded: boolean; childId: string | null }> {
  const rows = await run<{ held: boolean; recorded: boolean; child_id: string | null }>(
    db,
    InvokeBegin(schema),
    [
      ...leaseValues(lease),
      write.seq,
      write.key,
      write.queue,
      write.payloadJson,
      write.priority,
      write.maxAttempts,
      write.wakeupChannel,
    ],
  );
  const row = rows[0];
  return { held: row?.held ?? false, recorded: row?.recorded ?? false, childId: row?.child_id ?? null };
}

/** An invoked job as its invoking job reads it. */
export interface InvokedJob {
  held: boolean;
  /** 'succeeded', 'dead', 'cancelled', 'pending', 'running', or 'removed'. */
  status: string;
  result: unknown;
  error: { code: string | null; class: string | null; message: string | null };
}

/** Reads how invoked job `childId` of `queue` stands (for the lease holder only). */
export async function readInvoked(
  db: Queryable,
  schema: string,
  lease: FenceRef,
  childId: string,
  queue: string,
): Promise<InvokedJob> {
  const rows = await run<{
    held: boolean;
    status: string;
    result: unknown;
    last_error_code: string | null;
    last_error_class: string | null;
    last_error_message: string | null;
  }>(db, InvokeOutcome(schema), [...leaseValues(lease), childId, queue]);
  const row = rows[0];
  return {
    held: row?.held ?? false,
    status: row?.status ?? 'removed',
    result: row?.result ?? null,
    error: {
      code: row?.last_error_code ?? null,
      class: row?.last_error_class ?? null,
      message: row?.last_error_message ?? null,
    },
  };
}
