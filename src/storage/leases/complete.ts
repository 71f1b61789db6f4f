import type pg from 'pg';
import { defineStatement, type Queryable } from '../db.js';
import {
  byQueue,
  FENCE_INPUT_ARRAYS,
  FENCE_INPUT_COLUMNS,
  type FenceRef,
  fenceArrays,
  fencedCte,
} from '../fence.js';
import { finishedChannel, finishNoticesCte, finishNoticesSent } from '../finish-notices.js';
import { flowReleaseCte, flowWakeups } from '../flows/flow-release.js';
import { wakeupChannel } from '../jobs/enqueue.js';
import { keySlotsReleaseCte } from '../queues/key-slots.js';
import {
  orderingAdvanceCte,
  orderingRepairNeeded,
  orderingWakeups,
  repairOrderingKeys,
} from '../queues/ordering.js';
import { refusalCountingCte } from '../refusals.js';
import { idsFrom, perLaneCtes, runLaneRouted } from '../roles/lane-routing.js';

/**
 * JobCompleteMany: running -> succeeded, for a batch of leases of one queue in one statement.
 *
 * Every completion is made of these fragments, in this order:
 * 1. `input`: the batch, unnested from parallel arrays (and the handlers' results, when any).
 * 2. `fenced` (fence.ts): each job whose lease is still the presented one (token, claim id, owner,
 *    unexpired in database time), locked FOR UPDATE by one primary-key probe, in id order.
 * 3. `changed`: the lane move. An accepted job leaves the hot table: it is deleted from jobs, one
 *    DELETE per lane (lane-routing.ts), and its compact record inserted into finished_jobs
 *    (`finished`) in the same statement. That record is the attempt's audit entry (owner, token,
 *    claim id, attempt, claimed_at, lease extensions, finished_at): a completion writes no
 *    job_events row.
 * 4. The count of refusals (refusals.ts): a lease that was no longer current changes nothing and is
 *    counted as a lost-fence attempt, with an event naming it.
 * 5. The finish notices (finish-notices.ts): one notification per batch for the jobs someone
 *    waits for (`lh.waitFor`); a batch nobody waits for notifies nothing. Always present: a waiter
 *    may flag a job after its claim.
 * Then the features, only in the statement for batches that use them (`features`):
 * 6. The ordering hand-over (ordering.ts): a completed head of an ordering key hands the key to its
 *    next job, claimable from this commit, with a wake-up.
 * 7. The key-slot release (key-slots.ts): a job that held a per-key concurrency slot gives it back.
 * 8. The flow release (flow-release.ts): a completed flow parent releases its children; a child
 *    whose last parent this was is claimable from this commit, with a wake-up.
 * Steps 6 to 8 read only `changed`, the rows the fence accepted: a refused (stale) completion hands
 * over no key, frees no slot and releases no child.
 *
 * Pay for what you use. Whether a job needs steps 6 to 8 is fixed before its completion: an
 * ordering key and flow children are set at enqueue, a key slot by the claim that took it. The
 * claim returns it (`plain`, claim.ts), and a batch whose jobs are all plain runs the statement
 * without those steps: the fence, the move, the count and the notices, nothing else. The plain
 * statement still checks: a job that turns out to need a feature is locked but not moved, and is
 * returned as `deferred`; `completeJobs` sends it again through the whole statement, so a wrong
 * flag costs a statement, never a key, a slot or a child.
 *
 * A batch is of one queue (the `queue` parameter): the fence's probe and the delete name it, so
 * the statement is answered from that queue's part of a layout split by queue (docs/scaling.md); a
 * batch of several queues is sent as one statement per queue (`completeJobs`).
 */
interface CompletionShape {
  /** Some handler of the batch returned a value, stored with its finished record. */
  readonly results: boolean;
  /** Some job of the batch has an ordering key, a key slot or flow children (steps 6 to 8). */
  readonly features: boolean;
  /** Deletes in each job's lane (a schema at 018 and 019), or through the parent by id. */
  readonly routed: boolean;
}

/** The parameters of a completion, numbered after the fence's five arrays, for one shape. */
function completionParams(shape: CompletionShape) {
  let next = 6;
  const take = () => `$${next++}`;
  const wakeup = shape.features ? take() : null;
  const results = shape.results ? take() : null;
  return { wakeup, results, finished: take(), queue: take() };
}

/** The values for `completionParams`, in the same order. */
function completionValues(schema: string, shape: CompletionShape, refs: readonly CompleteRef[]): unknown[] {
  return [
    ...fenceArrays(refs),
    ...(shape.features ? [wakeupChannel(schema)] : []),
    ...(shape.results ? [refs.map((ref) => ref.result ?? null)] : []),
    finishedChannel(schema),
    refs[0]?.queue ?? null,
  ];
}

// The columns a job's finished record copies from its row, named once: the lane move returns them
// and the insert into finished_jobs lists them, so a column added to both tables (job_uid, 027) is
// carried by adding it here. The unrouted completion, for a schema before 018 or 027 (a rolling
// upgrade: runLaneRouted), leaves out the identity, which such a schema has no column for; a job
// completed through it in the seconds after 027 ran keeps a finished record without job_uid (its
// key was read by its claim, not from this record).
const CARRIED_ALWAYS = [
  'id',
  'priority',
  'attempt_count',
  'max_attempts',
  'lease_owner',
  'lease_token',
  'lease_claim_id',
  'created_at',
  'claimed_at',
  'lease_extensions',
] as const;
const carried = (routed: boolean): readonly string[] =>
  routed ? [...CARRIED_ALWAYS, 'job_uid'] : CARRIED_ALWAYS;
// What the lane move returns of each deleted job: its finished record, and what the features read.
const moved = (routed: boolean) =>
  `${carried(routed)
    .map((c) => `j.${c}`)
    .join(', ')}, j.notify_on_finish`;
const FEATURE_COLUMNS = 'j.queue_name, j.ordering_key, j.concurrency_key, j.holds_key_slot, j.has_children';
// The plain statement moves only jobs that need none of steps 6 to 8 (see `deferred`).
const PLAIN_ONLY = 'AND j.ordering_key IS NULL AND NOT j.holds_key_slot AND NOT j.has_children';

/**
 * The plain statement's answer: one row whatever the batch's size, naming only the jobs not
 * completed, the deferred (locked, left for the whole statement) and the refused (the fence's
 * `refused_rows`); every other job of the batch was completed. Both lists are nearly always empty:
 * a row per completed job cost the server a tuple and the worker a parsed row, for hundreds of
 * jobs a batch (a tenth of a no-op job's worker CPU).
 */
const PLAIN_ANSWER = `SELECT ARRAY(SELECT id FROM fenced WHERE id NOT IN (SELECT id FROM changed))::text[] AS deferred_ids,
         ARRAY(SELECT id FROM refused_rows)::text[] AS refused_ids,
         ${finishNoticesSent()} AS announced`;

const completeStatement = (shape: CompletionShape) => (s: string) => {
  const p = completionParams(shape);
  const { features, routed } = shape;
  const CARRIED = carried(routed);
  const movedCtes = perLaneCtes(
    'changed',
    routed,
    (lane) => `DELETE FROM ${s}.jobs AS j
    WHERE ${idsFrom('fenced', lane, p.queue)}${features ? '' : `\n      ${PLAIN_ONLY}`}
    RETURNING ${moved(routed)}${features ? `,\n              ${FEATURE_COLUMNS}` : ''}`,
  );
  const finished = `finished AS (
    INSERT INTO ${s}.finished_jobs (${CARRIED.join(', ')}, queue_name, finished_at${p.results ? ', result' : ''})
    SELECT ${CARRIED.map((c) => `c.${c}`).join(', ')}, ${p.queue}::text, now()${p.results ? ', f.result::jsonb' : ''}
    FROM changed AS c${p.results ? ' JOIN fenced AS f ON f.id = c.id' : ''}
  )`;
  const featureCtes = features
    ? `,
  ${orderingAdvanceCte(s, 'changed', p.queue)},
  ${keySlotsReleaseCte(s, 'changed', p.queue)},
  ${flowReleaseCte(s, 'changed', routed)}`
    : '';
  // The plain statement counts as refused only what the fence refused: a job it locked but left
  // for the whole statement (`deferred`) was not refused.
  const refusals = refusalCountingCte(s, 'complete', p.queue, features ? 'changed' : 'fenced');
  const select = features
    ? `SELECT id, false AS deferred, ${orderingRepairNeeded()} AS repair,
         ${orderingWakeups(p.wakeup ?? '')} AS woken, ${finishNoticesSent()} AS announced,
         ${flowWakeups(p.wakeup ?? '')} AS flow_woken
  FROM changed`
    : PLAIN_ANSWER;
  return `
  WITH input AS (
    SELECT * FROM unnest(${FENCE_INPUT_ARRAYS}${p.results ? `, ${p.results}::text[]` : ''})
      AS t(${FENCE_INPUT_COLUMNS}${p.results ? ', result' : ''})
  ),
  ${fencedCte(s, routed, p.queue)},
  ${movedCtes},
  ${finished}${featureCtes},
  ${refusals},
  ${finishNoticesCte('changed', 'notify_on_finish', p.finished)}
  ${select}`;
};

/** The completion for a batch with an ordering key, a key slot or flow children, routed to the lane of each job. */
export const JobCompleteMany = defineStatement(
  'complete_jobs',
  completeStatement({ results: false, features: true, routed: true }),
);
/** As JobCompleteMany, storing each handler's result. */
export const JobCompleteManyWithResults = defineStatement(
  'complete_jobs_with_results',
  completeStatement({ results: true, features: true, routed: true }),
);
/** The completion of a batch of plain jobs: the fence, the lane move, the count and the notices. */
export const JobCompletePlainMany = defineStatement(
  'complete_jobs_plain',
  completeStatement({ results: false, features: false, routed: true }),
);
/** As JobCompletePlainMany, storing each handler's result. */
export const JobCompletePlainManyWithResults = defineStatement(
  'complete_jobs_plain_with_results',
  completeStatement({ results: true, features: false, routed: true }),
);

/** A completion's routed statement, and the same through the parent by id (a schema before 018 or 019; runLaneRouted). */
function unroutedTwin(name: string, shape: Omit<CompletionShape, 'routed'>) {
  return defineStatement(`${name}_unrouted`, completeStatement({ ...shape, routed: false }));
}
const STATEMENTS = {
  plain: {
    routed: JobCompletePlainMany,
    unrouted: unroutedTwin('complete_jobs_plain', { results: false, features: false }),
  },
  plainWithResults: {
    routed: JobCompletePlainManyWithResults,
    unrouted: unroutedTwin('complete_jobs_plain_with_results', { results: true, features: false }),
  },
  features: {
    routed: JobCompleteMany,
    unrouted: unroutedTwin('complete_jobs', { results: false, features: true }),
  },
  featuresWithResults: {
    routed: JobCompleteManyWithResults,
    unrouted: unroutedTwin('complete_jobs_with_results', { results: true, features: true }),
  },
};

/** The one place the fragments of a batch's completion are chosen: see CompletionShape. */
function statementsFor(shape: CompletionShape) {
  if (shape.features) return shape.results ? STATEMENTS.featuresWithResults : STATEMENTS.features;
  return shape.results ? STATEMENTS.plainWithResults : STATEMENTS.plain;
}

/**
 * A lease to complete, with the handler's result as JSON text (null or absent: none), and `plain`
 * when its claim saw no ordering key, key slot or flow children (absent: treated as not plain).
 */
export interface CompleteRef extends FenceRef {
  result?: string | null;
  plain?: boolean;
}

/** Completes the leases it can; returns the ids whose completion was accepted. */
export async function completeJobs(
  db: Queryable,
  schema: string,
  refs: readonly CompleteRef[],
): Promise<Set<string>> {
  const accepted = new Set<string>();
  for (const group of byQueue(refs)) {
    for (const id of await completeQueueJobs(db, schema, group)) accepted.add(id);
  }
  return accepted;
}

/** Completes the leases of one queue in one statement (two when a plain batch deferred a job). */
async function completeQueueJobs(
  db: Queryable,
  schema: string,
  refs: readonly CompleteRef[],
  features = refs.some((ref) => ref.plain !== true),
): Promise<string[]> {
  const results = refs.some((ref) => ref.result != null);
  const shape = { results, features, routed: true };
  const statements = statementsFor(shape);
  const send = <R extends pg.QueryResultRow>() =>
    runLaneRouted<R>(
      db,
      schema,
      statements.routed(schema),
      statements.unrouted(schema),
      completionValues(schema, shape, refs),
    );
  if (!features) {
    // One row (PLAIN_ANSWER): every job of the batch not named in it was completed.
    const answer = (await send<{ deferred_ids: string[]; refused_ids: string[] }>())[0];
    const deferred = new Set(answer?.deferred_ids ?? []);
    const notDone = new Set([...deferred, ...(answer?.refused_ids ?? [])]);
    const done = refs.filter((ref) => !notDone.has(ref.jobId)).map((ref) => ref.jobId);
    if (deferred.size === 0) return done;
    // A plain batch left a job that needs a feature step (its flag was wrong): the whole statement.
    const again = refs.filter((ref) => deferred.has(ref.jobId));
    return [...done, ...(await completeQueueJobs(db, schema, again, true))];
  }
  const rows = await send<{ id: string; repair?: string[] }>();
  // Rare: a key's next job was enqueued (or cancelled) while this statement ran; hand it over now.
  const repair = rows[0]?.repair ?? [];
  if (repair.length > 0) await repairOrderingKeys(db, schema, repair, repair.length);
  return rows.map((row) => row.id);
}
