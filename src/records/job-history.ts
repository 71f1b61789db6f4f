import type { EventRow } from '../storage/jobs/history.js';
import type { Job, JobStatus } from '../storage/jobs/read.js';

/**
 * What happened to a job. `enqueued`, `claimed` and `completed` are synthesised from durable facts
 * (created_at, the claim facts every attempt's record carries, the finished record); the others
 * are rows of job_events, written by the statement that made the transition.
 */
export type JobEventKind =
  | 'enqueued'
  | 'claimed'
  | 'completed'
  | 'retried'
  | 'dead'
  | 'snoozed'
  | 'skipped'
  | 'key_skipped'
  | 'lease_expired'
  | 'replayed'
  | 'cancelled'
  | 'refused'
  | 'removed'
  | 'deduplicated'
  | 'step';

/** One entry of a job's history. Fields that do not apply to a kind are null. */
export interface JobEvent {
  /** What happened. */
  kind: JobEventKind;
  /** When, in database time. */
  at: Date;
  /** The recorded event's id; null for a synthesised entry. */
  eventId: string | null;
  /** The job's status right after the event, when it changed one. */
  statusAfter: JobStatus | null;
  /** The attempt the entry belongs to, from 1. */
  attempt: number | null;
  /** The lease owner of that attempt (for `refused`: who presented the stale lease). */
  owner: string | null;
  /** The fencing token of that attempt (for `refused`: the stale token presented). */
  token: string | null;
  /** Lease extensions granted during the attempt this entry ends. */
  leaseExtensions: number | null;
  /** Stored error code (failures, expiries, cancellation). */
  errorCode: string | null;
  /** The error's class name. */
  errorClass: string | null;
  /** A bounded message: never payload data. */
  message: string | null;
  /** For `retried`, `snoozed`, `lease_expired`: how long until the job may run again. */
  delayMs: number | null;
  /** Who acted (replay, cancel). */
  actor: string | null;
  /**
   * Why (replay, cancel, retention; for `skipped`: `unstarted` or `shutdown`, the worker handed the
   * lease back; for `key_skipped`: the operator's reason for skipping a dead job with `lh.skip`).
   */
  reason: string | null;
  /** For `refused`: which write was refused (`heartbeat`, `complete`, `fail`, `snooze`, `effect`, `step`). */
  operation: string | null;
  /**
   * Small structured detail (a tombstone's summary of what was removed; for `step`, the recorded
   * durable step: `{ step: 'charge#0', kind: 'step' }`, a sleep with its `wakeAt`).
   */
  detail: unknown;
}

/** A job with its history in order. */
export type JobWithHistory = Job & { history: JobEvent[] };

// Recorded kinds that end an attempt: they carry that attempt's claim facts.
const ENDS_ATTEMPT = new Set(['retried', 'dead', 'snoozed', 'skipped', 'lease_expired', 'cancelled']);

function blank(kind: JobEventKind, at: Date): JobEvent {
  return {
    kind,
    at,
    eventId: null,
    statusAfter: null,
    attempt: null,
    owner: null,
    token: null,
    leaseExtensions: null,
    errorCode: null,
    errorClass: null,
    message: null,
    delayMs: null,
    actor: null,
    reason: null,
    operation: null,
    detail: null,
  };
}

function fromRow(row: EventRow): JobEvent {
  const detail = row.detail as { operation?: unknown } | null;
  return {
    kind: eventKind(row),
    at: row.at,
    eventId: row.id,
    statusAfter: (row.status_after as JobStatus | null) ?? null,
    attempt: row.attempt,
    owner: row.lease_owner,
    token: row.lease_token,
    leaseExtensions: row.lease_extensions,
    errorCode: row.error_code,
    errorClass: row.error_class,
    message: row.message,
    delayMs: row.delay_ms === null ? null : Math.round(row.delay_ms),
    actor: row.actor,
    reason: row.reason,
    operation: row.kind === 'refused' && typeof detail?.operation === 'string' ? detail.operation : null,
    detail: row.kind === 'refused' ? null : row.detail,
  };
}

// An operator's skip was recorded as `skipped` before migration 009 gave it its own kind; a row of
// that meaning (told apart by the cancelled status it left) reads as `key_skipped` either way.
function eventKind(row: EventRow): JobEventKind {
  if (row.kind === 'skipped' && row.status_after === 'cancelled') return 'key_skipped';
  return row.kind as JobEventKind;
}

function claimed(at: Date, attempt: number | null, owner: string | null, token: string | null): JobEvent {
  return { ...blank('claimed', at), attempt, owner, token, statusAfter: 'running' };
}

/**
 * Builds a job's history: `enqueued` first, then the recorded events in the order they were
 * written, with each attempt's `claimed` entry placed at its claim time (before its outcome) and a
 * succeeded job's `completed` entry at its finish time. `leaseExtensions` is the count of the
 * latest claim (the live row's or the finished record's).
 */
export function synthesiseHistory(
  job: Job,
  rows: readonly EventRow[],
  leaseExtensions: number | null,
): JobEvent[] {
  const recorded = rows.map(fromRow);
  const claims: JobEvent[] = [];
  rows.forEach((row, i) => {
    const event = recorded[i] as JobEvent;
    if (ENDS_ATTEMPT.has(event.kind) && row.claimed_at && event.token !== null) {
      claims.push(claimed(row.claimed_at, event.attempt, event.owner, event.token));
    }
  });
  if (job.status === 'running' && job.claimedAt) {
    // The attempt under way: its claim is recorded only on the row so far.
    const current = claimed(job.claimedAt, job.attemptCount, job.leaseOwner, job.leaseToken);
    claims.push({ ...current, leaseExtensions });
  } else if (job.status === 'succeeded' && job.claimedAt) {
    claims.push(claimed(job.claimedAt, job.attemptCount, job.leaseOwner, job.leaseToken));
  }
  if (job.status === 'succeeded' && job.finishedAt) {
    const completed: JobEvent = {
      ...blank('completed', job.finishedAt),
      statusAfter: 'succeeded',
      attempt: job.attemptCount,
      owner: job.leaseOwner,
      token: job.leaseToken,
      leaseExtensions,
    };
    // Only refusals of stale writes can be recorded after the completion.
    const later = recorded.findIndex((e) => e.at.getTime() > completed.at.getTime());
    recorded.splice(later === -1 ? recorded.length : later, 0, completed);
  }
  claims.sort(
    (a, b) =>
      a.at.getTime() - b.at.getTime() ||
      (a.token !== null && b.token !== null ? Number(BigInt(a.token) - BigInt(b.token)) : 0),
  );
  return [blank('enqueued', job.createdAt), ...mergeByTime(claims, recorded)].map((event) =>
    event.kind === 'enqueued' ? { ...event, statusAfter: 'pending' } : event,
  );
}

/**
 * Whether `claim` goes before `event`: by time, and within one millisecond (a Date holds no
 * microseconds, and a lease handed back is claimed again well within one) by token: an event of an
 * earlier claim (a lower token) ended that attempt before this claim; otherwise the claim comes
 * first, since a claim commits before anything that ends its own attempt.
 */
function claimComesFirst(claim: JobEvent, event: JobEvent): boolean {
  const apart = claim.at.getTime() - event.at.getTime();
  if (apart !== 0) return apart < 0;
  if (claim.token !== null && event.token !== null && claim.token !== event.token) {
    return BigInt(claim.token) < BigInt(event.token);
  }
  return true;
}

// Stable merge of two sequences each already in order (see claimComesFirst).
function mergeByTime(claims: readonly JobEvent[], recorded: readonly JobEvent[]): JobEvent[] {
  const merged: JobEvent[] = [];
  let c = 0;
  let r = 0;
  while (c < claims.length || r < recorded.length) {
    const claim = claims[c];
    const event = recorded[r];
    if (claim && (!event || claimComesFirst(claim, event))) {
      merged.push(claim);
      c++;
    } else if (event) {
      merged.push(event);
      r++;
    }
  }
  return merged;
}
