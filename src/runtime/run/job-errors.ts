/**
 * Errors a handler throws to say how its failure should be treated. Anything else it throws is
 * "unknown" and retried with a smaller budget. Each carries a `leaseholdOutcome` tag so they are
 * recognised even when two copies of the package are installed.
 */

/** Never retried: the job goes to `dead` at once (invalid payload, unsupported version...). */
export class PermanentError extends Error {
  /** Stored as the job's last_error_code. */
  readonly code: string;
  /** Tag the worker reads to classify the failure. */
  readonly leaseholdOutcome = 'permanent' as const;

  constructor(message: string, options: { code?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'PermanentError';
    this.code = options.code ?? 'PERMANENT';
  }
}

/**
 * Thrown by `job.effect` when an earlier attempt recorded an effect's intent but no result and no
 * `reconcile` was given: nobody knows whether it happened, so the job goes dead with code
 * `UNCERTAIN_EFFECT` for a person to decide, rather than performing it blindly again.
 */
export class UncertainEffectError extends PermanentError {
  /** The effect whose outcome is unknown. */
  readonly effect: string;

  constructor(effect: string) {
    super(
      `effect "${effect}" was started by an earlier attempt with no recorded result, and has no reconcile: not performing it again`,
      { code: 'UNCERTAIN_EFFECT' },
    );
    this.name = 'UncertainEffectError';
    this.effect = effect;
  }
}

/**
 * Thrown by `job.step` / `job.sleep` when a resumed handler calls its steps in another order than
 * an earlier attempt recorded them: the job goes dead with code `STEP_ORDER` and no step runs
 * again (a recorded result cannot be matched to a step it was not recorded for).
 */
export class StepOrderError extends PermanentError {
  /** The step recorded at this position by an earlier attempt (`charge#0`). */
  readonly recorded: string;
  /** The step the handler called there now. */
  readonly called: string;

  constructor(position: number, recorded: string, called: string) {
    super(
      `step ${position} was recorded as "${recorded}" but the handler now calls "${called}" there: steps must be called in the same order on every attempt`,
      { code: 'STEP_ORDER' },
    );
    this.name = 'StepOrderError';
    this.recorded = recorded;
    this.called = called;
  }
}

/** Worth retrying (a timeout, a short outage): retried with backoff, or after `delayMs`. */
export class RetryableError extends Error {
  /** Stored as the job's last_error_code. */
  readonly code: string;
  /** Retry after exactly this delay instead of the jittered backoff. */
  readonly delayMs: number | undefined;
  /** Tag the worker reads to classify the failure. */
  readonly leaseholdOutcome = 'retryable' as const;

  constructor(message: string, options: { code?: string; delayMs?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'RetryableError';
    this.code = options.code ?? 'RETRYABLE';
    this.delayMs = options.delayMs;
  }
}

/** Run again after `delayMs` without spending an attempt (e.g. a downstream rate limit). */
export class SnoozeError extends Error {
  /** How long to wait before the job may be claimed again. */
  readonly delayMs: number;
  /** Tag the worker reads to classify the outcome. */
  readonly leaseholdOutcome = 'snooze' as const;

  /** Set by `job.waitForEvent`: an event sent while the job hands itself back wakes it at once. */
  readonly waiting: boolean;

  constructor(delayMs: number, options: { waiting?: boolean } = {}) {
    super(`snoozed for ${delayMs} ms`);
    this.name = 'SnoozeError';
    this.delayMs = delayMs;
    this.waiting = options.waiting === true;
  }
}

/** How a handler's thrown value is classified. */
export type FailureClass = 'permanent' | 'retryable' | 'snooze' | 'unknown';

/** Classifies a thrown value by its tag. */
export function classifyFailure(err: unknown): FailureClass {
  const tag =
    typeof err === 'object' && err !== null
      ? (err as { leaseholdOutcome?: unknown }).leaseholdOutcome
      : undefined;
  return tag === 'permanent' || tag === 'retryable' || tag === 'snooze' ? tag : 'unknown';
}
