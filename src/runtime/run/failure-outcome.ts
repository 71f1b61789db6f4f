import type { FenceRef } from '../../storage/fence.js';
import type { ClaimedRow } from '../../storage/leases/claim.js';
import type { FailRef, SnoozeRef } from '../../storage/leases/fail.js';
import type { ResolvedQueue } from '../options.js';
import type { OutcomeBatcher, OutcomeResult } from '../outcome-batcher.js';
import { describeError, type ErrorDetails } from './error-details.js';
import { classifyFailure } from './job-errors.js';

/** Longest snooze or explicit retry delay a handler may ask for: 30 days. */
const MAX_DELAY_MS = 30 * 86_400_000;

/** The outcome write a handler's error asks for: a snooze, or a failure (retry or dead). */
export type FailureWrite = { kind: 'snooze'; ref: SnoozeRef } | { kind: 'fail'; ref: FailRef };

/**
 * Turns a handler's error into the write that records it: a `SnoozeError` snoozes (attempt
 * refunded); otherwise a failure whose retry budget depends on the error's class (unclassified
 * errors get the queue's smaller `unknownErrorAttempts`) and the queue's attempt cap. `details` are
 * the error's stored diagnostics, when the caller already described it.
 */
export function failureWrite(
  lease: FenceRef,
  config: ResolvedQueue,
  err: unknown,
  details: ErrorDetails = describeError(err),
): FailureWrite {
  const kind = classifyFailure(err);
  if (kind === 'snooze') {
    const requested = (err as { delayMs?: unknown }).delayMs;
    const delayMs =
      typeof requested === 'number' && Number.isFinite(requested)
        ? Math.min(MAX_DELAY_MS, Math.max(0, Math.round(requested)))
        : 0;
    const waiting = (err as { waiting?: unknown }).waiting === true;
    return { kind: 'snooze', ref: waiting ? { ...lease, delayMs, waiting } : { ...lease, delayMs } };
  }
  const requestedDelay = kind === 'retryable' ? (err as { delayMs?: unknown }).delayMs : undefined;
  const budget = kind === 'unknown' ? config.unknownErrorAttempts : null;
  const cap = config.maxAttempts;
  return {
    kind: 'fail',
    ref: {
      ...lease,
      retryable: kind !== 'permanent',
      delayMs:
        typeof requestedDelay === 'number' && Number.isFinite(requestedDelay)
          ? Math.min(MAX_DELAY_MS, Math.max(0, requestedDelay))
          : null,
      baseMs: config.backoff.baseMs,
      maxMs: config.backoff.maxMs,
      attemptBudget: budget === null ? cap : cap === null ? budget : Math.min(budget, cap),
      ...details,
    },
  };
}

/** The failure recorded for a run past its maximum runtime: a retryable `TIMEOUT`. */
export function timeoutWrite(lease: FenceRef, config: ResolvedQueue): FailRef {
  const timeout = Object.assign(new Error(`job exceeded its maximum runtime of ${config.maxRuntimeMs} ms`), {
    name: 'TimeoutError',
    code: 'TIMEOUT',
  });
  return {
    ...lease,
    retryable: true,
    delayMs: null,
    baseMs: config.backoff.baseMs,
    maxMs: config.backoff.maxMs,
    attemptBudget: config.maxAttempts,
    ...describeError(timeout),
  };
}

/** The write that returns a claimed job that never started: pending again at once, attempt refunded. */
export function handBackWrite(row: ClaimedRow, owner: string, queue: string): SnoozeRef {
  return {
    jobId: row.id,
    token: row.lease_token,
    claimId: row.lease_claim_id,
    owner,
    queue,
    delayMs: 0,
    handBack: 'unstarted',
  };
}

/** Sends a failure's write through the outcome batcher: a snooze, or a fenced failure. */
export function sendFailure(
  batcher: Pick<OutcomeBatcher, 'fail' | 'snooze'>,
  write: ReturnType<typeof failureWrite>,
): Promise<OutcomeResult> {
  return write.kind === 'snooze' ? batcher.snooze(write.ref) : batcher.fail(write.ref);
}
