import { defineStatement, type Queryable, run } from '../db.js';
import { finishedChannel, finishNoticesCte, finishNoticesSent } from '../finish-notices.js';
import { flowParentDeadCtes, flowWakeups } from '../flows/flow-release.js';
import { wakeupChannel } from '../jobs/enqueue.js';
import { keySlotsReleaseCte } from '../queues/key-slots.js';

/**
 * JobRecoverExpired: running -> pending (after jittered backoff) or running -> dead (attempts
 * spent), for at most $1 jobs whose lease lapsed in database time. Served by jobs_expired_lease_idx.
 * SKIP LOCKED lets several sweeps run at once without waiting on or double-counting each other; the
 * outer WHERE repeats the expiry test, so a job renewed or completed after the subquery's snapshot
 * is left alone (under Read Committed the update re-reads the locked row before changing it).
 * Appends a `lease_expired` event per job (the claim it ends, and whether it retries or died), in
 * the same statement, and gives back the per-key concurrency slot a run held. Notifies ($4) every
 * queue that got jobs back to `pending`, as an enqueue does, so idle listening workers claim them
 * at commit instead of at their next poll (the sweeping worker may serve none of those queues);
 * returns the longest backoff it gave, so the sweeping worker can wake its queues again when the
 * last of them is due. A job that dies while someone waits for it is announced on $5
 * (finish-notices.ts).
 * last of them is due. A flow parent that dies here applies its children's onParentDead policy in
 * this statement, as a failure does (flow-release.ts); plain jobs touch no flow table.
 * The update checks `status::text`, not `status`: the partial index's predicate then cannot match,
 * so `expired` drives primary-key lookups. Otherwise, with statistics gathered while the leases
 * were live (the usual case right after a crash), the planner expected one expired row, drove the
 * update from jobs_expired_lease_idx and rescanned `expired` for each of its rows: 5.3 s instead
 * of 34 ms for a batch of 1,000 out of 10,000 expired leases.
 */
export const JobRecoverExpired = defineStatement(
  'recover_expired_leases',
  (s) => `
  WITH RECURSIVE expired AS (
    SELECT id, lease_owner, lease_token, lease_claim_id
    FROM ${s}.jobs
    WHERE status = 'running'
      AND lease_expires_at <= now()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
  ),
  moved AS (
    UPDATE ${s}.jobs AS j
    SET status = CASE WHEN j.attempt_count >= j.max_attempts
                      THEN 'dead'::${s}.job_status ELSE 'pending'::${s}.job_status END,
        available_at = CASE WHEN j.attempt_count >= j.max_attempts THEN j.available_at
          ELSE now() + random() * least($3::double precision, $2::double precision * power(2, least(j.attempt_count - 1, 52)))
                       * interval '1 millisecond' END,
        finished_at = CASE WHEN j.attempt_count >= j.max_attempts THEN now() END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        last_error_code = 'LEASE_EXPIRED',
        last_error_class = NULL,
        last_error_message = 'the lease expired before the job reported an outcome',
        last_error_stack = NULL
    FROM expired
    WHERE j.id = expired.id
      AND j.status::text = 'running'
      AND j.lease_expires_at <= now()
    RETURNING j.id, j.status, j.queue_name, j.attempt_count, expired.lease_owner, expired.lease_token,
              expired.lease_claim_id, j.claimed_at, j.lease_extensions, j.last_error_code, j.last_error_message,
              CASE WHEN j.status = 'pending'
                THEN greatest(0, extract(epoch FROM j.available_at - now()) * 1000) END AS delay_ms,
              j.concurrency_key, j.holds_key_slot, j.notify_on_finish, j.has_children
  ),
  ${keySlotsReleaseCte(s, 'moved')},
  ${flowParentDeadCtes(s, 'moved', "status = 'dead'")},
  recorded AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, status_after, attempt, lease_owner, lease_token,
                                 lease_claim_id, claimed_at, lease_extensions, error_code, message, delay_ms)
    SELECT id, queue_name, 'lease_expired', status::text, attempt_count, lease_owner, lease_token,
           lease_claim_id, claimed_at,
           lease_extensions, last_error_code, last_error_message, delay_ms
    FROM moved
  ),
  woken AS (
    SELECT pg_notify($4, queue_name)
    FROM (SELECT DISTINCT queue_name FROM moved WHERE status = 'pending') AS retried_queues
  ),
  ${finishNoticesCte('moved', "notify_on_finish AND status = 'dead'", '$5')}
  SELECT count(*) FILTER (WHERE status = 'pending')::int AS retried,
         count(*) FILTER (WHERE status = 'dead')::int AS dead,
         (SELECT count(*) FROM woken)::int AS woken, ${flowWakeups('$4')} AS flow_woken,
         ${finishNoticesSent()}::int AS announced,
         coalesce(max(delay_ms), 0)::float8 AS max_delay_ms
  FROM moved`,
);

/** Recovers one bounded batch of expired leases; `maxDelayMs` is the longest backoff given. */
export async function recoverExpiredLeases(
  db: Queryable,
  schema: string,
  params: { limit: number; baseMs: number; maxMs: number },
): Promise<{ retried: number; dead: number; maxDelayMs: number }> {
  const rows = await run<{ retried: number; dead: number; max_delay_ms: number }>(
    db,
    JobRecoverExpired(schema),
    [params.limit, params.baseMs, params.maxMs, wakeupChannel(schema), finishedChannel(schema)],
  );
  return {
    retried: rows[0]?.retried ?? 0,
    dead: rows[0]?.dead ?? 0,
    maxDelayMs: Number(rows[0]?.max_delay_ms ?? 0),
  };
}

/**
 * The ms from now (database time) until the earliest running lease that has not lapsed yet lapses;
 * null when no lease is running. No lock; the first entry of jobs_expired_lease_idx past now().
 * Read alone after a sweep (LeaseNextExpiry) and beside the lapse test (LeaseLapseProbe).
 */
const nextLapseMs = (s: string) => `(SELECT extract(epoch FROM min(lease_expires_at) - now()) * 1000
          FROM ${s}.jobs
          WHERE status = 'running' AND lease_expires_at > now())`;

/** A row's `ms` (numeric arrives as text) as a number, or null. */
const msOrNull = (ms: string | number | null | undefined): number | null =>
  ms === null || ms === undefined ? null : Number(ms);

/**
 * LeaseNextExpiry: reads nothing but the time until the next lease lapses (nextLapseMs). The
 * recovery sweep sleeps until then (within its interval), so a dead worker's leases are swept as
 * they lapse, not up to an interval later.
 */
const LeaseNextExpiry = defineStatement(
  'lease_next_expiry',
  (s) => `
  SELECT ${nextLapseMs(s)} AS ms`,
);

/** Milliseconds until the earliest unlapsed running lease lapses (database time); null when none runs. */
export async function msUntilNextLeaseExpiry(db: Queryable, schema: string): Promise<number | null> {
  const rows = await run<{ ms: string | number | null }>(db, LeaseNextExpiry(schema), []);
  return msOrNull(rows[0]?.ms);
}

/**
 * LeaseLapseProbe: reads, without a lock, whether some running lease has lapsed (database time),
 * and the time until the next one lapses (nextLapseMs). Two probes of jobs_expired_lease_idx, one
 * row. A worker's sweep asks this first and runs JobRecoverExpired only when a lease has lapsed: on
 * a healthy or idle queue nearly every pass finds none, and the sweep then costs one index probe
 * instead of the recovery statement and LeaseNextExpiry (two statements a second per worker, each
 * woken from idle, in the way of the next claim). The probe is only a hint: a lease that lapses just
 * after it is swept by the next pass, as one that lapses just after a sweep always was, and the
 * sweep itself re-checks every lease it takes.
 */
const LeaseLapseProbe = defineStatement(
  'lease_lapse_probe',
  (s) => `
  SELECT EXISTS (SELECT 1 FROM ${s}.jobs WHERE status = 'running' AND lease_expires_at <= now()) AS lapsed,
         ${nextLapseMs(s)} AS ms`,
);

/** Whether a running lease has lapsed (database time), and ms until the next unlapsed one lapses (null: none runs). */
export async function probeLeaseLapses(
  db: Queryable,
  schema: string,
): Promise<{ lapsed: boolean; nextLapseInMs: number | null }> {
  const rows = await run<{ lapsed: boolean; ms: string | number | null }>(db, LeaseLapseProbe(schema), []);
  return { lapsed: rows[0]?.lapsed === true, nextLapseInMs: msOrNull(rows[0]?.ms) };
}
