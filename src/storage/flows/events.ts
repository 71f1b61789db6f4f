import { defineStatement, type Queryable, run } from '../db.js';
import { type FenceRef, LEASE_FENCE, leaseValues } from '../fence.js';
import { wakeupChannel } from '../jobs/enqueue.js';
import { JobSnoozeWaitingMany } from '../leases/fail.js';
import { refusalCountingCte } from '../refusals.js';

// Durable events (migration 025; runtime/durable/wait-event.ts). A sender and a waiter meet on a
// transaction-level advisory lock per (schema, name, key): the sender holds it shared from before
// its write until its transaction ends; the waiter takes it exclusively, between recording its
// wait and looking for the event, and so waits for every sender in flight. A sender that came
// later sees the recorded wait (its write runs after the lock, in a fresh snapshot) and wakes it.
const LOCK_CLASS = 0x4c45;

/** EventLockShared: the sender's side of the (name $2, key $3) lock in schema $1, held to commit. */
export const EventLockShared = defineStatement(
  'event_lock_shared',
  () =>
    `SELECT 1 AS locked FROM pg_advisory_xact_lock_shared(${LOCK_CLASS}, hashtext($1::text || '/' || $2::text || '/' || $3::text))`,
);

/** EventLockWait: the waiter's side: returns once no sender of (name $2, key $3) is in flight. */
export const EventLockWait = defineStatement(
  'event_lock_wait',
  () =>
    `SELECT 1 AS locked FROM pg_advisory_xact_lock(${LOCK_CLASS}, hashtext($1::text || '/' || $2::text || '/' || $3::text))`,
);

/**
 * EventSend: event ($1 name, $2 key, $3 payload) recorded; each job waiting on it marked woken
 * (once: a woken wait is not woken again) and, when already handed back, claimable now, with a
 * wakeup notice on $5; up to 100 events older than $4 ms pruned. Returns the event id and the
 * number of jobs woken. The jobs write looks rows up by id (job_waits_event_idx gives the ids).
 */
export const EventSend = defineStatement(
  'event_send',
  (s) => `
  WITH sent AS (
    INSERT INTO ${s}.job_events_sent (name, key, payload) VALUES ($1, $2, $3::jsonb) RETURNING id
  ),
  pruned AS (
    DELETE FROM ${s}.job_events_sent
    WHERE id IN (SELECT id FROM ${s}.job_events_sent
                 WHERE sent_at < now() - $4::double precision * interval '1 millisecond'
                 ORDER BY sent_at LIMIT 100)
  ),
  woken AS (
    UPDATE ${s}.job_waits AS w SET woken_at = now()
    WHERE w.name = $1 AND w.key = $2 AND w.woken_at IS NULL
    RETURNING w.job_id
  ),
  -- No status condition in the scan: a job handing itself back as this runs is found in its
  -- newest version (the row lock), pending or still running (then its hand-back sees woken_at).
  ready AS (
    UPDATE ${s}.jobs AS j
    SET available_at = CASE WHEN j.status = 'pending' THEN least(j.available_at, now()) ELSE j.available_at END
    WHERE j.id = ANY (ARRAY(SELECT job_id FROM woken))
    RETURNING j.queue_name, j.status
  )
  SELECT (SELECT id FROM sent)::text AS id, (SELECT count(*) FROM woken)::integer AS woken,
         (SELECT count(pg_notify($5, queue_name)) FROM ready WHERE status = 'pending')::integer AS notified`,
);

const FENCED = (s: string) => `
  input AS (
    SELECT $1::bigint AS id, $2::bigint AS token, $3::bigint AS claim_id, $4::text AS owner, $5::text AS queue_name
  ),
  changed AS (
    SELECT j.id, j.queue_name, j.attempt_count
    FROM ${s}.jobs AS j, input
    WHERE ${LEASE_FENCE}
    FOR SHARE OF j
  ),
  ${refusalCountingCte(s, 'step')}`;

/**
 * WaitBegin: (no step $6) -> step $6 named $7 of kind 'wait', timing out $10 ms from now
 * (database time), and the job waiting on event ($8 name, $9 key), while the lease is current;
 * a `step` event in the job's history. Refused writes are counted (operation 'step').
 */
export const WaitBegin = defineStatement(
  'wait_begin',
  (s) => `
  WITH ${FENCED(s)},
  recorded AS (
    INSERT INTO ${s}.job_steps (job_id, seq, name, kind, wake_at, attempt, lease_token)
    SELECT changed.id, $6, $7, 'wait', now() + $10::double precision * interval '1 millisecond',
           changed.attempt_count, $2
    FROM changed
    ON CONFLICT (job_id, seq) DO NOTHING
    RETURNING job_id, name, wake_at, attempt
  ),
  waiting AS (
    INSERT INTO ${s}.job_waits (job_id, seq, name, key)
    SELECT job_id, $6, $8, $9 FROM recorded
    ON CONFLICT (job_id) DO UPDATE
      SET seq = excluded.seq, name = excluded.name, key = excluded.key, started_at = now(), woken_at = NULL
  ),
  step_event AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, attempt, lease_owner, lease_token, lease_claim_id, detail)
    SELECT r.job_id, changed.queue_name, 'step', r.attempt, $4, $2, $3,
           jsonb_build_object('step', r.name, 'kind', 'wait', 'event', $8::text, 'timeoutAt', r.wake_at)
    FROM recorded AS r, changed
  )
  SELECT (SELECT count(*) FROM changed) = 1 AS held, (SELECT count(*) FROM recorded) = 1 AS recorded`,
);

/**
 * WaitResolve: wait step $6 -> ended, while the lease is current: with the first event of its
 * name and key sent at most $7 ms before the wait began (or after), else with a timeout once its
 * wake time passed (or at once if its wait row is gone); the job's wait row removed when it ends. Returns the step's result (null while
 * it still waits) and the milliseconds to its timeout.
 */
export const WaitResolve = defineStatement(
  'wait_resolve',
  (s) => `
  WITH ${FENCED(s)},
  wait AS (
    SELECT st.wake_at, w.name, w.key, w.started_at
    FROM changed
    JOIN ${s}.job_steps AS st ON st.job_id = changed.id AND st.seq = $6 AND st.kind = 'wait' AND st.result IS NULL
    -- Left: a wait whose row is gone (never expected) ends as timed out rather than waiting on.
    LEFT JOIN ${s}.job_waits AS w ON w.job_id = changed.id AND w.seq = $6
  ),
  event AS (
    SELECT e.payload
    FROM ${s}.job_events_sent AS e, wait
    WHERE e.name = wait.name AND e.key = wait.key
      AND e.sent_at >= wait.started_at - $7::double precision * interval '1 millisecond'
    ORDER BY e.sent_at, e.id
    LIMIT 1
  ),
  outcome AS (
    SELECT CASE
             WHEN EXISTS (SELECT 1 FROM event)
               THEN jsonb_build_object('timedOut', false, 'payload', (SELECT payload FROM event))
             WHEN wait.wake_at <= now() OR wait.name IS NULL THEN jsonb_build_object('timedOut', true)
           END AS result
    FROM wait
  ),
  resolved AS (
    UPDATE ${s}.job_steps AS st SET result = outcome.result
    FROM outcome
    WHERE st.job_id = $1 AND st.seq = $6 AND st.result IS NULL AND outcome.result IS NOT NULL
    RETURNING st.result
  ),
  gone AS (
    DELETE FROM ${s}.job_waits AS w WHERE w.job_id = $1 AND EXISTS (SELECT 1 FROM resolved)
  )
  SELECT (SELECT count(*) FROM changed) = 1 AS held, (SELECT result FROM resolved) AS result,
         (SELECT greatest(0, extract(epoch FROM wake_at - now()) * 1000)::double precision FROM wait)
           AS remaining_ms`,
);

/**
 * The event statements as SECURITY DEFINER functions: the worker waits (under its lease) and
 * hands a waiting job back; the producer sends. Entries of FUNCTIONS (functions.ts).
 */
export const EVENT_FUNCTIONS = [
  {
    role: 'worker',
    statement: WaitBegin,
    args: 'bigint, bigint, bigint, text, text, integer, text, text, text, double precision',
    returns: 'held boolean, recorded boolean',
  },
  {
    role: 'worker',
    statement: WaitResolve,
    args: 'bigint, bigint, bigint, text, text, integer, double precision',
    returns: 'held boolean, result jsonb, remaining_ms double precision',
  },
  { role: 'worker', statement: EventLockWait, args: 'text, text, text', returns: 'locked integer' },
  {
    role: 'worker',
    statement: JobSnoozeWaitingMany,
    args: 'bigint[], bigint[], bigint[], text[], text[], double precision[], text[], text',
    returns: 'id bigint',
  },
  { role: 'producer', statement: EventLockShared, args: 'text, text, text', returns: 'locked integer' },
  {
    role: 'producer',
    statement: EventSend,
    args: 'text, text, jsonb, double precision, text',
    returns: 'id text, woken integer, notified integer',
  },
] as const;

/** Records the wait at `seq` (fenced); whether the lease held and the wait was recorded now. */
export async function beginWait(
  db: Queryable,
  schema: string,
  lease: FenceRef,
  step: { seq: number; key: string; name: string; eventKey: string; timeoutMs: number },
): Promise<{ held: boolean; recorded: boolean }> {
  const rows = await run<{ held: boolean; recorded: boolean }>(db, WaitBegin(schema), [
    ...leaseValues(lease),
    step.seq,
    step.key,
    step.name,
    step.eventKey,
    step.timeoutMs,
  ]);
  return { held: rows[0]?.held ?? false, recorded: rows[0]?.recorded ?? false };
}

/** Waits until no sender of (name, key) is in flight (one autocommitted statement on `db`). */
export async function awaitSenders(db: Queryable, schema: string, name: string, key: string): Promise<void> {
  await run(db, EventLockWait(schema), [schema, name, key]);
}

/** Ends the wait at `seq` if its event came or its timeout passed (fenced). */
export async function resolveWait(
  db: Queryable,
  schema: string,
  lease: FenceRef,
  seq: number,
  retentionMs: number,
): Promise<{ held: boolean; result: unknown; remainingMs: number }> {
  const rows = await run<{ held: boolean; result: unknown; remaining_ms: number | null }>(
    db,
    WaitResolve(schema),
    [...leaseValues(lease), seq, retentionMs],
  );
  const row = rows[0];
  return { held: row?.held ?? false, result: row?.result ?? null, remainingMs: row?.remaining_ms ?? 0 };
}

/** Sends an event on `db` (in its transaction when a client): returns its id and the jobs woken. */
export async function sendEventRows(
  db: Queryable,
  schema: string,
  event: { name: string; key: string; payloadJson: string; retentionMs: number },
): Promise<{ id: string; woken: number }> {
  await run(db, EventLockShared(schema), [schema, event.name, event.key]);
  const rows = await run<{ id: string; woken: number }>(db, EventSend(schema), [
    event.name,
    event.key,
    event.payloadJson,
    event.retentionMs,
    wakeupChannel(schema),
  ]);
  return { id: rows[0]?.id ?? '', woken: rows[0]?.woken ?? 0 };
}
