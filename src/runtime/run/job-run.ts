import { traceHandler } from '../../observability/tracing.js';
import type { ResolvedQueue } from '../options.js';
import type { OutcomeBatcher, OutcomeResult } from '../outcome-batcher.js';
import type { OutcomeDetail } from '../telemetry-events.js';
import { describeError } from './error-details.js';
import { failureWrite, sendFailure } from './failure-outcome.js';
import type { ActiveJob, EffectStore } from './job-context.js';
import { completionOf } from './job-output.js';
import { applyTaskSchema } from './payload-schema.js';

/** What running a job's handler needs from its worker: the outcome writes, and the counting. */
export interface RunHost {
  readonly batcher: OutcomeBatcher;
  /** Where jobs' own transactions run (a batch's `job.transaction`). */
  readonly store: EffectStore;
  /** Largest handler return value kept as a result, in JSON bytes. */
  readonly maxResultBytes: number;
  /** The traceparent the claim read for a job (taken once). */
  takeTraceparent(jobId: string): string | undefined;
  /** Counts an outcome and emits it (a `lost` one is reported as a lost lease, once per run). */
  count(job: ActiveJob, result: OutcomeResult, detail?: OutcomeDetail): void;
}

/** The queue a job runs for: its options, and its slot accounting (a `QueueRunner`). */
export interface RunQueue {
  readonly config: ResolvedQueue;
  /** The handler returned or threw; its outcome write is now in flight. */
  handlerSettled(): void;
}

/**
 * Runs one job's handler and writes its outcome: the payload checked against the task's schema
 * (tasks with one only), the handler traced, then a completion with its result or a failure by the
 * error's class. The queue hears once the handler returned or threw, before the write is answered.
 */
export async function runOne(host: RunHost, job: ActiveJob, q: RunQueue): Promise<void> {
  const { config } = q;
  let outcome: Promise<OutcomeResult> | null;
  // Made only for a failure (its error code): a completed job's outcome carries no detail.
  let detail: OutcomeDetail | undefined;
  try {
    if (config.schema !== null) await applyTaskSchema(job, config.schema); // tasks with a schema only
    const handler = config.handler as (job: ActiveJob) => Promise<unknown>;
    const value = await traceHandler(job, host.takeTraceparent(job.id), handler);
    const completion = completionOf(job, value, host.maxResultBytes);
    outcome = reportOutcome(host, job, () => host.batcher.complete(completion));
  } catch (err) {
    detail = {};
    outcome = failOutcome(host, job, config, err, detail);
  }
  job.settled = true;
  q.handlerSettled();
  if (outcome) host.count(job, await outcome, detail);
}

/**
 * Sends the failure a handler's error asks for (see `reportOutcome`); `detail` gets its error code.
 * `classifyAs` decides retry or dead when it is not `err` itself (a batch item's `retry`).
 */
export function failOutcome(
  host: RunHost,
  job: ActiveJob,
  config: ResolvedQueue,
  err: unknown,
  detail: OutcomeDetail,
  classifyAs: unknown = err,
): Promise<OutcomeResult> | null {
  const details = describeError(err);
  detail.errorCode = details.errorCode;
  return reportOutcome(host, job, () =>
    sendFailure(host.batcher, failureWrite(job.lease, config, classifyAs, details)),
  );
}

/**
 * Sends an outcome unless one was already sent for this run, or the lease is no longer ours as
 * far as this process can tell: then nothing is sent, and the job is left to the recovery sweep.
 */
export function reportOutcome(
  host: RunHost,
  job: ActiveJob,
  send: () => Promise<OutcomeResult>,
): Promise<OutcomeResult> | null {
  // job.transaction settled the outcome (committed with the handler's writes, or refused).
  if (job.reported) return job.ownOutcome === null ? null : Promise.resolve(job.ownOutcome);
  job.reported = true;
  if (!job.holdsLease) {
    host.count(job, 'lost');
    return null;
  }
  return send();
}
