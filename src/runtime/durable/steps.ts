import type { Lease } from '../../records/lease.js';
import { LeaseLostError, ValidationError } from '../../shared/errors.js';
import { MAX_SLEEP_MS, MAX_STEP_NAME, MAX_STEPS } from '../../shared/limits.js';
import { serialisePayload } from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import { awaitSenders, beginWait, resolveWait } from '../../storage/flows/events.js';
import { beginInvoke, readInvoked } from '../../storage/flows/invoke.js';
import { listSteps, type RecordedStep, recordStep } from '../../storage/flows/steps.js';
import { wakeupChannel } from '../../storage/jobs/enqueue.js';
import { PermanentError, SnoozeError, StepOrderError } from '../run/job-errors.js';
import { type InvokeChild, invokeOutcome } from './invoke.js';
import { beforeDeadline } from './lease-deadline.js';

// What a step's error says when its statement got no answer before the lease's deadline.
const NOT_RECORDED_IN_TIME = 'was not recorded before the lease ran out';

/** The steps' bounds (their home is shared/limits.ts, which storage's functions share). */
export { MAX_SLEEP_MS, MAX_STEP_NAME, MAX_STEPS };

/** Error codes a job goes dead with when a step cannot be recorded. */
export const STEP_ERROR_CODES = {
  /** A resumed handler called its steps in another order than recorded (`StepOrderError`). */
  order: 'STEP_ORDER',
  /** The job called more than `MAX_STEPS` steps and sleeps. */
  tooMany: 'TOO_MANY_STEPS',
  /** A step's return value is larger, as JSON, than the worker's `maxResultBytes`. */
  tooLarge: 'STEP_RESULT_TOO_LARGE',
  /** A step's return value cannot be stored as JSON. */
  notJson: 'STEP_RESULT_NOT_JSON',
} as const;

const STEP_NAME = /^[A-Za-z0-9_.:-]{1,100}$/;

/** Where a job's steps are recorded and the lease that fences them. */
export interface StepHost {
  readonly db: Queryable;
  readonly schema: string;
  readonly lease: Lease;
  /** The lease is still ours as far as this process can tell. */
  readonly holdsLease: boolean;
  /** When this process stops counting the lease as its own (monotonic, `performance.now()`). */
  readonly deadline: number;
  /** Largest step result, as JSON bytes (the worker's `maxResultBytes`). */
  readonly maxResultBytes: number;
  /** Called when the database refused a write: the lease is gone. */
  lostLease(): void;
}

/**
 * One attempt's steps: the call count, the occurrences of each name, and the steps recorded by
 * earlier attempts, read once, on the first step call (a handler calling no step reads nothing).
 */
export class StepRun {
  readonly #host: StepHost;
  #next = 0;
  readonly #occurrences = new Map<string, number>();
  #recorded: Promise<Map<number, RecordedStep>> | null = null;
  // After a reordered resume every later step call fails the same way: none runs.
  #broken: StepOrderError | null = null;

  constructor(host: StepHost) {
    this.#host = host;
  }

  /** `job.step(name, fn)`: the recorded result, or `fn`'s, recorded (fenced) before it is returned. */
  async step<T>(name: string, fn: () => Promise<T> | T, options?: unknown): Promise<T> {
    if (typeof fn !== 'function') throw new ValidationError('step', 'give job.step(name, async () => ...)');
    // Refused rather than ignored: a retry budget that silently did nothing would mislead.
    if (options !== undefined) {
      throw new ValidationError(
        'step options',
        "none are supported yet: a step follows its job's retry rules",
      );
    }
    const { seq, key } = this.#place(name, 'step');
    const recorded = await this.#recordedAt(seq, key, 'step');
    if (recorded) return recorded.result as T;
    // Checked again after the read: a process frozen while it was in flight may resume after its
    // successor took the job; the monotonic deadline tells at once that running now is not ours.
    if (!this.#host.holdsLease) throw this.#lost(key, 'was not run');
    const value = await fn();
    const json = stepResultText(value, this.#host.maxResultBytes, key);
    const done = await this.#bounded(
      recordStep(this.#host.db, this.#host.schema, this.#host.lease, seq, key, {
        kind: 'step',
        resultJson: json,
      }),
      key,
      'ran but was not recorded before the lease ran out (the next holder runs it again)',
    );
    this.#check(done, key);
    return JSON.parse(json) as T;
  }

  /** `job.sleep` / `job.sleepUntil`: returns once the recorded wake time passed, else hands the job back until then. */
  async sleep(name: string, wake: { ms: number } | { at: Date }): Promise<void> {
    const { seq, key } = this.#place(name, 'sleep');
    const recorded = await this.#recordedAt(seq, key, 'sleep');
    let remainingMs = recorded?.remainingMs ?? 0;
    if (!recorded) {
      const done = await this.#bounded(
        recordStep(this.#host.db, this.#host.schema, this.#host.lease, seq, key, {
          kind: 'sleep',
          ms: 'ms' in wake ? wake.ms : null,
          at: 'at' in wake ? wake.at : null,
        }),
        key,
        NOT_RECORDED_IN_TIME,
      );
      this.#check(done, key);
      remainingMs = done.remainingMs ?? 0;
    }
    // Handed back like a snooze: no lease held, no attempt spent, claimable at the wake time.
    if (remainingMs > 0) throw new SnoozeError(Math.ceil(remainingMs));
  }

  /**
   * `job.waitForEvent`: the recorded outcome, or the event's (found under the fence), else the job
   * is handed back until the event wakes it or the timeout passes. See storage/flows/events.ts.
   */
  async waitForEvent(name: string, key: string, timeoutMs: number, retentionMs: number): Promise<unknown> {
    const { seq, key: stepKey } = this.#place(name, 'wait');
    const recorded = await this.#recordedAt(seq, stepKey, 'wait');
    if (recorded && recorded.result !== null) return recorded.result;
    const { db, schema, lease } = this.#host;
    if (!recorded) {
      const begun = await this.#bounded(
        beginWait(db, schema, lease, { seq, key: stepKey, name, eventKey: key, timeoutMs }),
        stepKey,
        NOT_RECORDED_IN_TIME,
      );
      this.#check(begun, stepKey);
    }
    // Every sender in flight has committed or rolled back before the event is looked for.
    await this.#bounded(awaitSenders(db, schema, name, key), stepKey, NOT_RECORDED_IN_TIME);
    const ended = await this.#bounded(
      resolveWait(db, schema, lease, seq, retentionMs),
      stepKey,
      NOT_RECORDED_IN_TIME,
    );
    if (!ended.held) throw this.#lost(stepKey, 'was not recorded');
    if (ended.result !== null) return ended.result;
    throw new SnoozeError(Math.max(1, Math.ceil(ended.remainingMs)), { waiting: true });
  }

  /**
   * `job.invoke`: the child recorded at this step, or a new one enqueued with the step (fenced, in
   * one statement: a retried job finds it and enqueues none); then the child's result, its end as a
   * typed error, or the job handed back until the child ends (see invokeOutcome, storage/flows/invoke.ts).
   */
  async invoke(child: InvokeChild): Promise<unknown> {
    const { seq, key } = this.#place(child.name, 'invoke');
    const recorded = await this.#recordedAt(seq, key, 'invoke');
    const { db, schema, lease } = this.#host;
    const stored = recorded?.result as { childId: string; queue: string } | undefined;
    let target = stored ? { id: stored.childId, queue: stored.queue } : null;
    if (!target) {
      const begun = await this.#bounded(
        beginInvoke(db, schema, lease, {
          seq,
          key,
          ...child,
          wakeupChannel: wakeupChannel(schema),
        }),
        key,
        NOT_RECORDED_IN_TIME,
      );
      this.#check(begun, key);
      target = { id: begun.childId as string, queue: child.queue };
    }
    const read = await this.#bounded(
      readInvoked(db, schema, lease, target.id, target.queue),
      key,
      'was not read before the lease ran out',
    );
    if (!read.held) throw this.#lost(key, 'was not read');
    return invokeOutcome(target.id, read, !recorded);
  }

  // Validates the name and gives the call its position and numbered name, synchronously: steps
  // started together (Promise.all) are numbered in the order they were called.
  #place(name: string, kind: RecordedStep['kind']): { seq: number; key: string } {
    if (typeof name !== 'string' || !STEP_NAME.test(name)) {
      throw new ValidationError(`${kind} name`, 'must be 1 to 100 letters, digits or _ - . :');
    }
    if (this.#broken) throw this.#broken;
    const seq = this.#next;
    if (seq >= MAX_STEPS) {
      throw new PermanentError(`job ${this.#host.lease.jobId} called more than ${MAX_STEPS} steps`, {
        code: STEP_ERROR_CODES.tooMany,
      });
    }
    this.#next = seq + 1;
    const occurrence = this.#occurrences.get(name) ?? 0;
    this.#occurrences.set(name, occurrence + 1);
    return { seq, key: `${name}#${occurrence}` };
  }

  // The step an earlier attempt recorded at `seq`, checked against this call; null when none was.
  async #recordedAt(seq: number, key: string, kind: RecordedStep['kind']): Promise<RecordedStep | null> {
    if (!this.#host.holdsLease) throw this.#lost(key, 'was not run');
    this.#recorded ??= this.#bounded(
      listSteps(this.#host.db, this.#host.schema, this.#host.lease),
      key,
      'was not run (no answer from the database before the lease ran out)',
    ).then((steps) => {
      if (steps === null) throw this.#lost(key, 'was not run');
      return steps;
    });
    // A failed read is not kept: the next step call of this attempt reads again.
    const steps = await this.#recorded.catch((err: unknown) => {
      this.#recorded = null;
      throw err;
    });
    const found = steps.get(seq);
    if (!found) return null;
    if (found.name !== key || found.kind !== kind) {
      this.#broken ??= new StepOrderError(seq, found.name, key);
      throw this.#broken;
    }
    return found;
  }

  // A step's statement waits no longer than the lease (lease-deadline.ts): past it, the run is lost.
  #bounded<T>(write: Promise<T>, key: string, what: string): Promise<T> {
    return beforeDeadline(this.#host, write, () => this.#lost(key, what));
  }

  #check(done: { held: boolean; recorded: boolean }, key: string): void {
    if (!done.held) throw this.#lost(key, 'ran but was not recorded (the next holder runs it again)');
    if (!done.recorded) {
      throw new Error(`leasehold: step "${key}" of job ${this.#host.lease.jobId} was recorded twice`);
    }
  }

  #lost(key: string, what: string): LeaseLostError {
    this.#host.lostLease();
    return new LeaseLostError(`the lease on job ${this.#host.lease.jobId} was lost; step "${key}" ${what}`);
  }
}

// As a job's result: a BigInt (what query libraries return for counts) is stored as its decimal text.
const bigintAsText = (_key: string, value: unknown) => (typeof value === 'bigint' ? value.toString() : value);

/**
 * A step's return value as stored JSON (undefined as null). Over `maxBytes`, or not JSON, it is a
 * `PermanentError` (`STEP_RESULT_TOO_LARGE`, `STEP_RESULT_NOT_JSON`): running it again would return
 * the same. The message says how large or why, never what the value holds.
 */
export function stepResultText(value: unknown, maxBytes: number, key: string): string {
  try {
    return serialisePayload(value ?? null, maxBytes, `step "${key}" result`, bigintAsText);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    const code = /over the limit/.test(err.message) ? STEP_ERROR_CODES.tooLarge : STEP_ERROR_CODES.notJson;
    throw new PermanentError(`step "${key}" returned a value that cannot be recorded: ${err.message}`, {
      code,
    });
  }
}

/** Checks `job.sleep`'s duration: whole milliseconds from 0 to one year. */
export function sleepMs(ms: unknown): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0 || ms > MAX_SLEEP_MS) {
    throw new ValidationError('sleep ms', `must be a number of milliseconds from 0 to ${MAX_SLEEP_MS}`);
  }
  return Math.round(ms);
}

/**
 * Checks `job.sleepUntil`'s wake time: a valid Date, at most a year ahead (by this process's clock,
 * which only bounds it: the wake time recorded is this Date, compared in database time).
 */
export function sleepUntilDate(at: unknown): Date {
  if (!(at instanceof Date) || Number.isNaN(at.getTime())) {
    throw new ValidationError('sleepUntil', 'must be a valid Date');
  }
  if (at.getTime() - Date.now() > MAX_SLEEP_MS) {
    throw new ValidationError('sleepUntil', 'must be at most a year ahead');
  }
  return at;
}
