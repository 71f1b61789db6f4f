import { defineStatement, type Queryable, run } from '../db.js';
import {
  byQueue,
  FENCE_INPUT_ARRAYS,
  FENCE_INPUT_COLUMNS,
  type FenceRef,
  fenceArrays,
  fencedCte,
} from '../fence.js';
import { finishedChannel, finishNoticesCte, finishNoticesSent } from '../finish-notices.js';
import { flowParentDeadCtes, flowWakeups } from '../flows/flow-release.js';
import { wakeupChannel } from '../jobs/enqueue.js';
import { keySlotsReleaseCte } from '../queues/key-slots.js';
import { refusalCountingCte } from '../refusals.js';

// A failed attempt is retried when the caller allows it and the attempt budget is not spent.
// The budget is the job's max_attempts, or a smaller one for unclassified errors.
const RETRY = `(input.retryable AND j.attempt_count < least(j.max_attempts, coalesce(input.attempt_budget, j.max_attempts)))`;
// Exponential backoff with full jitter, capped: random() * min(max, base * 2^(attempt-1)).
// The exponent is capped so that power() cannot overflow for very large attempt counts.
const JITTERED_BACKOFF_MS = `random() * least(input.max_ms, input.base_ms * power(2, least(j.attempt_count - 1, 52)))`;

/**
 * JobFailMany: running -> pending (retry after backoff) or running -> dead, for a batch in one statement.
 * Fenced like a completion; refused rows are counted. A dead job is kept, with its last error,
 * for inspection and replay. Error fields arrive already bounded and free of payload data.
 * Each accepted row also appends its audit event (`retried` with the delay, or `dead`), carrying the
 * claim facts of the attempt it ends, in the same statement. Looks rows up by primary key; takes
 * the row lock of each job it changes. A run that held a per-key concurrency slot gives it back.
 * A dead head of an ordering key stays its head: the key is blocked until replay or skip.
 * A job that dies while someone waits for it is announced on $15 (finish-notices.ts).
 * A flow parent that dies here applies its children's onParentDead policy in this statement ('run'
 * children released, 'cancel' ones cancelled with their descendants; see flow-release.ts); a retry
 * releases nothing, and plain jobs (has_children false) touch no flow table.
 * A batch is of one queue ($17), named by the fence's probe and the update, so that a layout split
 * by queue answers it from that queue's part (docs/scaling.md); `failJobs` sends one per queue.
 */
export const JobFailMany = defineStatement(
  'fail_jobs',
  (s) => `
  WITH RECURSIVE input AS (
    SELECT *
    FROM unnest(${FENCE_INPUT_ARRAYS},
                $6::boolean[], $7::double precision[], $8::double precision[], $9::double precision[],
                $10::integer[], $11::text[], $12::text[], $13::text[], $14::text[])
      AS t(${FENCE_INPUT_COLUMNS},
           retryable, delay_ms, base_ms, max_ms,
           attempt_budget, error_code, error_class, error_message, error_stack)
  ),
  ${fencedCte(s, false, '$17')},
  changed AS (
    UPDATE ${s}.jobs AS j
    SET status = CASE WHEN ${RETRY} THEN 'pending'::${s}.job_status ELSE 'dead'::${s}.job_status END,
        available_at = CASE WHEN ${RETRY}
          THEN now() + coalesce(input.delay_ms, ${JITTERED_BACKOFF_MS}) * interval '1 millisecond'
          ELSE j.available_at END,
        finished_at = CASE WHEN ${RETRY} THEN NULL ELSE now() END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        last_error_code = input.error_code,
        last_error_class = input.error_class,
        last_error_message = input.error_message,
        last_error_stack = input.error_stack
    FROM fenced AS input -- the fenced rows, with the columns of their input
    WHERE j.id = input.id AND j.queue_name = $17::text
    RETURNING j.id, j.status, j.queue_name, j.attempt_count, input.owner, input.token, input.claim_id,
              j.claimed_at,
              j.lease_extensions, input.error_code, input.error_class, input.error_message,
              CASE WHEN j.status = 'pending'
                THEN greatest(0, extract(epoch FROM j.available_at - now()) * 1000) END AS delay_ms,
              j.concurrency_key, j.holds_key_slot,
              least(j.max_attempts, coalesce(input.attempt_budget, j.max_attempts)) AS attempt_budget,
              input.retryable, j.notify_on_finish, j.has_children
  ),
  recorded AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, status_after, attempt, lease_owner, lease_token,
                                 lease_claim_id, claimed_at, lease_extensions, error_code, error_class,
                                 message, delay_ms, detail)
    SELECT id, $17::text, CASE WHEN status = 'dead' THEN 'dead' ELSE 'retried' END, status::text,
           attempt_count, owner, token, claim_id, claimed_at, lease_extensions, error_code, error_class,
           error_message, delay_ms,
           -- The budget that applied (max_attempts, or less for unclassified errors), so "dead at
           -- 3 of 8 attempts" can say why; and whether the error allowed no retry at all.
           jsonb_build_object('attemptBudget', attempt_budget, 'permanent', NOT retryable)
    FROM changed
  ),
  ${keySlotsReleaseCte(s, 'changed', '$17')},
  ${flowParentDeadCtes(s, 'changed', "status = 'dead'")},
  ${refusalCountingCte(s, 'fail', '$17')},
  ${finishNoticesCte('changed', "notify_on_finish AND status = 'dead'", '$15')}
  SELECT id, status::text AS status, ${finishNoticesSent()} AS announced,
         ${flowWakeups('$16')} AS flow_woken FROM changed`,
);

/**
 * JobSnoozeMany: running -> pending after a delay, without spending an attempt.
 * The claim counted an attempt; a snooze gives it back. Fenced; refused rows are counted.
 * Appends a `snoozed` event, or `skipped` for a lease the worker hands back (a job it never
 * started, or one aborted at shutdown), in the same statement. Looks rows up by primary key.
 * A batch is of one queue ($8), as for JobFailMany; `snoozeJobs` sends one per queue.
 */
export const JobSnoozeMany = defineStatement('snooze_jobs', (s) => snoozeText(s, false));

/**
 * JobSnoozeWaitingMany: JobSnoozeMany for jobs handing themselves back to wait for an event
 * (job.waitForEvent, migration 025): their wait rows are locked first (the lock an event's sender
 * takes to wake them), and a job whose wait was woken meanwhile is claimable at once.
 */
export const JobSnoozeWaitingMany = defineStatement('snooze_waiting_jobs', (s) => snoozeText(s, true));

function snoozeText(s: string, waiting: boolean): string {
  const delay = waiting
    ? 'CASE WHEN input.id IN (SELECT job_id FROM woken) THEN 0 ELSE input.delay_ms END'
    : 'input.delay_ms';
  const waits = waiting
    ? `,
  waits AS (
    SELECT w.job_id, w.woken_at FROM ${s}.job_waits AS w
    WHERE w.job_id = ANY (ARRAY(SELECT id FROM fenced))
    FOR UPDATE
  ),
  woken AS (SELECT job_id FROM waits WHERE woken_at IS NOT NULL)`
    : '';
  return `
  WITH input AS (
    SELECT *
    FROM unnest(${FENCE_INPUT_ARRAYS}, $6::double precision[], $7::text[])
      AS t(${FENCE_INPUT_COLUMNS}, delay_ms, hand_back)
  ),
  ${fencedCte(s, false, '$8')}${waits},
  changed AS (
    UPDATE ${s}.jobs AS j
    SET status = 'pending',
        attempt_count = j.attempt_count - 1,
        available_at = now() + ${delay} * interval '1 millisecond',
        lease_owner = NULL,
        lease_expires_at = NULL
    FROM fenced AS input -- the fenced rows, with the columns of their input
    WHERE j.id = input.id AND j.queue_name = $8::text
    RETURNING j.id, j.queue_name, j.attempt_count + 1 AS attempt, input.owner, input.token, input.claim_id,
              j.claimed_at,
              j.lease_extensions, input.delay_ms, input.hand_back, j.concurrency_key, j.holds_key_slot
  ),
  recorded AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, status_after, attempt, lease_owner, lease_token,
                                 lease_claim_id, claimed_at, lease_extensions, delay_ms, reason)
    SELECT id, $8::text, CASE WHEN hand_back IS NULL THEN 'snoozed' ELSE 'skipped' END, 'pending',
           attempt, owner, token, claim_id, claimed_at, lease_extensions, delay_ms, hand_back
    FROM changed
  ),
  ${keySlotsReleaseCte(s, 'changed', '$8')},
  ${refusalCountingCte(s, 'snooze', '$8')}
  SELECT id FROM changed`;
}

/** One failed attempt to record. */
export interface FailRef extends FenceRef {
  /** False: dead now, whatever attempts remain. */
  retryable: boolean;
  /** Explicit retry delay; null applies the jittered backoff. */
  delayMs: number | null;
  baseMs: number;
  maxMs: number;
  /** A smaller attempt budget than max_attempts (unclassified errors); null for none. */
  attemptBudget: number | null;
  errorCode: string;
  errorClass: string | null;
  errorMessage: string | null;
  errorStack: string | null;
}

/** Outcome of one recorded failure. */
export type FailOutcome = 'retry' | 'dead' | 'lost';

/** Records failures; returns the outcome per job id ('lost' when the fence refused it). */
export async function failJobs(
  db: Queryable,
  schema: string,
  refs: readonly FailRef[],
): Promise<Map<string, FailOutcome>> {
  const outcomes = new Map<string, FailOutcome>(refs.map((ref) => [ref.jobId, 'lost']));
  for (const group of byQueue(refs)) {
    for (const row of await failQueueJobs(db, schema, group)) {
      outcomes.set(row.id, row.status === 'dead' ? 'dead' : 'retry');
    }
  }
  return outcomes;
}

/** Records the failures of one queue in one statement; returns the rows accepted. */
async function failQueueJobs(
  db: Queryable,
  schema: string,
  refs: readonly FailRef[],
): Promise<{ id: string; status: string }[]> {
  return run<{ id: string; status: string }>(db, JobFailMany(schema), [
    ...fenceArrays(refs),
    refs.map((ref) => ref.retryable),
    refs.map((ref) => ref.delayMs),
    refs.map((ref) => ref.baseMs),
    refs.map((ref) => ref.maxMs),
    refs.map((ref) => ref.attemptBudget),
    refs.map((ref) => ref.errorCode),
    refs.map((ref) => ref.errorClass),
    refs.map((ref) => ref.errorMessage),
    refs.map((ref) => ref.errorStack),
    finishedChannel(schema),
    wakeupChannel(schema),
    refs[0]?.queue ?? null,
  ]);
}

/** One snooze to record. */
export interface SnoozeRef extends FenceRef {
  delayMs: number;
  /** Set when the worker hands the lease back rather than the handler snoozing: why. */
  handBack?: 'unstarted' | 'shutdown';
  /** Set when the job hands itself back to wait for an event (JobSnoozeWaitingMany). */
  waiting?: boolean;
}

/** Snoozes the leases it can; returns the ids accepted. */
export async function snoozeJobs(
  db: Queryable,
  schema: string,
  refs: readonly SnoozeRef[],
): Promise<Set<string>> {
  const accepted = new Set<string>();
  const plain = refs.filter((ref) => !ref.waiting);
  const waiting = refs.filter((ref) => ref.waiting);
  for (const [group, statement] of [
    ...byQueue(plain).map((g) => [g, JobSnoozeMany] as const),
    ...byQueue(waiting).map((g) => [g, JobSnoozeWaitingMany] as const),
  ]) {
    const rows = await run<{ id: string }>(db, statement(schema), [
      ...fenceArrays(group),
      group.map((ref) => ref.delayMs),
      group.map((ref) => ref.handBack ?? null),
      group[0]?.queue ?? null,
    ]);
    for (const row of rows) accepted.add(row.id);
  }
  return accepted;
}
