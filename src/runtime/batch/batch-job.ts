import { LeaseholdError, ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import type { EventWaitResult } from '../durable/wait-event.js';
import { ActiveJob, type EffectStore, type JobInvoke, type JobTransaction } from '../run/job-context.js';
import { RetryableError } from '../run/job-errors.js';
import type { OutcomeResult } from '../worker-events.js';
import type { BatchJobContext } from './batch-options.js';

/** Records one item's failure alone: `error` is what is stored, `classifyAs` what decides retry or dead. */
export type SettleAlone = (error: unknown, classifyAs: unknown) => Promise<OutcomeResult>;

/**
 * One job of a batch: a running job like any other (its own lease, fence, renewals and history),
 * which the handler may also settle alone with `fail` or `retry` before the batch ends.
 */
export class BatchItem extends ActiveJob implements BatchJobContext {
  /** Set by the batch runner when the item joins a batch. */
  settleAlone: SettleAlone = () =>
    Promise.reject(new LeaseholdError('JOB_STATE', `job ${this.id} is not in a running batch`));
  /** The outcome `fail` or `retry` asked for, once one did: the batch's end then leaves the item alone. */
  aloneOutcome: Promise<OutcomeResult> | null = null;
  /** The jobs of its batch, as its handler got them, and where their transaction runs (set as the batch starts). */
  #batch: { jobs: readonly BatchItem[]; store: EffectStore } | null = null;

  #transaction: JobTransaction | null = null;

  /**
   * In a batch, one transaction for the whole batch: `fn`'s writes and the completions of every job
   * of the batch not yet settled, all accepted and committed or none (see batch-transaction.ts).
   */
  override get transaction(): JobTransaction {
    this.#transaction ??= (async (fn: (tx: unknown) => unknown, options?: never) => {
      if (this.#batch === null) {
        throw new LeaseholdError('JOB_STATE', `job ${this.id} is not in a running batch`);
      }
      const { jobs, store } = this.#batch;
      // Loaded on first use: a batch that never opens a transaction does not load it.
      const { runBatchTransaction } = await import('./batch-transaction.js');
      return runBatchTransaction(jobs, store, fn, options);
    }) as JobTransaction;
    return this.#transaction;
  }

  /**
   * Durable sleeps are for one-job handlers: a batch handler's thrown snooze would hand back every
   * job of its batch. Refused, so that it cannot; `job.step` works per item.
   */
  override get sleep(): (name: string, ms: number) => Promise<void> {
    return refuseInBatch;
  }
  override get sleepUntil(): (name: string, at: Date) => Promise<void> {
    return refuseInBatch;
  }
  /** Refused in a batch for the same reason as `sleep`: a wait hands its job back. */
  override get waitForEvent(): <P>() => Promise<EventWaitResult<P>> {
    return refuseInBatch;
  }
  /** Refused in a batch too: an invoke hands its job back until the child ends. */
  override get invoke(): JobInvoke {
    return refuseInBatch as JobInvoke;
  }

  /** Joins the batch its handler is about to get. */
  joinBatch(jobs: readonly BatchItem[], store: EffectStore): void {
    this.#batch = { jobs, store };
  }

  fail(error: unknown): Promise<OutcomeResult> {
    return this.#settle(error, error);
  }

  retry(error: unknown, options: { delayMs?: number } = {}): Promise<OutcomeResult> {
    if (typeof options !== 'object' || options === null) {
      return Promise.reject(new ValidationError('options', 'must be { delayMs? }'));
    }
    try {
      rejectUnknownOptions(options, ['delayMs'], 'options');
    } catch (err) {
      return Promise.reject(err);
    }
    const { delayMs } = options;
    if (delayMs !== undefined && (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0)) {
      return Promise.reject(new ValidationError('options.delayMs', 'must be a number of ms, 0 or more'));
    }
    const message = error instanceof Error ? error.message : String(error);
    return this.#settle(error, new RetryableError(message, { delayMs }));
  }

  #settle(error: unknown, classifyAs: unknown): Promise<OutcomeResult> {
    if (this.aloneOutcome !== null || this.settled) {
      return Promise.reject(
        new LeaseholdError('JOB_STATE', `job ${this.id} already has an outcome in this batch`),
      );
    }
    this.aloneOutcome = this.settleAlone(error, classifyAs);
    return this.aloneOutcome;
  }
}

function noBatchSleep(): ValidationError {
  return new ValidationError(
    'sleep',
    'job.sleep is not available in a batch handler (it would hand back the whole batch)',
  );
}

// What a batch item's sleep, sleepUntil and waitForEvent do: refuse (see BatchItem).
function refuseInBatch(): Promise<never> {
  return Promise.reject(noBatchSleep());
}
