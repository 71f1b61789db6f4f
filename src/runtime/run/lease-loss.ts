import type { Queryable } from '../../storage/db.js';
import { leaseKey } from '../../storage/fence.js';
import { cancelledClaims } from '../../storage/leases/cancelled-claims.js';
import type { ActiveJob } from './job-context.js';

/**
 * What a loss report needs of a queue's settings (a `ResolvedQueue` satisfies it). Narrow on
 * purpose: this module sits below the worker events that the logger reads, and the options module
 * reads the logger, so it must not import the options.
 */
interface QueueSettingsForLoss {
  readonly name: string;
  readonly leaseMs: number;
  readonly maxRuntimeMs: number;
  readonly renew: 'progress' | 'alive';
}

/**
 * Why a run lost its lease, as the worker reports it: `lease-lost` (the database refused an
 * extension: the job was cancelled or taken over), `lease-deadline` (not renewed in time: the
 * event loop was blocked, extensions failed, or no `progress()` under `renew: 'progress'`),
 * `max-runtime` (the run passed `maxRuntimeMs` and was recorded as a retryable time-out),
 * `refused` (its outcome met the fence: the lease had already gone).
 */
export type LeaseLossReason = 'lease-lost' | 'lease-deadline' | 'max-runtime' | 'refused';

/** One run's lost lease, reported once per run: what happened and what to change. */
export interface LeaseLoss {
  readonly jobId: string;
  readonly queue: string;
  readonly attempt: number;
  readonly reason: LeaseLossReason;
  /** How late the lease keeper's timer ran when the loss was noticed (the event loop was busy that long), in ms. */
  readonly timerLateMs: number;
  /** One paragraph naming the job, what happened and what to change; never the payload. */
  readonly message: string;
}

/** The reason to report for a run whose outcome came back `lost`, from what the run knows. */
export function lossReasonOf(job: ActiveJob, now = performance.now()): LeaseLossReason {
  const reason = job.abortReason;
  if (reason === 'lease-lost' || reason === 'lease-deadline' || reason === 'max-runtime') return reason;
  return now >= job.deadline ? 'lease-deadline' : 'refused';
}

/** Describes a lost lease for the worker's event and log line. */
export function describeLeaseLoss(
  job: ActiveJob,
  queue: QueueSettingsForLoss,
  reason: LeaseLossReason,
  timerLateMs: number,
): LeaseLoss {
  const late = Math.max(0, Math.round(timerLateMs));
  const head = `job ${job.id} (queue ${queue.name}, attempt ${job.attempt}/${job.maxAttempts})`;
  return {
    jobId: job.id,
    queue: queue.name,
    attempt: job.attempt,
    reason,
    timerLateMs: late,
    message: `${head} ${explain(queue, reason, late)}`,
  };
}

function explain(queue: QueueSettingsForLoss, reason: LeaseLossReason, lateMs: number): string {
  const retried = 'its outcome is not recorded and the job runs again once the recovery sweep frees it';
  switch (reason) {
    case 'max-runtime':
      return (
        `ran past its maximum runtime (maxRuntimeMs ${queue.maxRuntimeMs} ms) and was recorded as a retryable ` +
        `TIMEOUT; its signal was aborted. If runs this long are expected, raise maxRuntimeMs for queue ` +
        `${queue.name}; otherwise find why the handler does not finish, and make it stop when job.signal aborts.`
      );
    case 'lease-lost':
      return (
        `lost its lease: the database refused its extension (the job was cancelled, or its lease had expired ` +
        `and another worker or the recovery sweep took it); ${retried} unless it was cancelled. Its signal was ` +
        'aborted: the handler should stop now. If this was not a cancellation, see why renewals came late ' +
        `(a blocked event loop, a slow database) or raise leaseMs (now ${queue.leaseMs} ms).`
      );
    case 'refused':
      return (
        `lost its lease before its outcome was written: the database refused the outcome (the lease had ` +
        `expired or was taken over); ${retried}. See why the worker was late (a blocked event loop, a slow ` +
        `database), or raise leaseMs (now ${queue.leaseMs} ms).`
      );
    case 'lease-deadline':
      return `lost its lease: it was not renewed within its ${queue.leaseMs} ms lease; ${retried}. ${deadlineCause(queue, lateMs)}`;
  }
}

function deadlineCause(queue: QueueSettingsForLoss, lateMs: number): string {
  if (lateMs >= queue.leaseMs / 4) {
    return (
      `The worker's event loop was blocked for about ${lateMs} ms, so the lease keeper could not renew in ` +
      'time: move CPU-bound or synchronous work off the main thread (a worker thread or child process), ' +
      `or raise leaseMs above the longest block.`
    );
  }
  if (queue.renew === 'progress') {
    return (
      `Under renew: 'progress' a lease is renewed only after job.progress(): call it at least every ` +
      `${Math.floor(queue.leaseMs / 3)} ms, or use renew: 'alive' (the default) to renew while the handler runs.`
    );
  }
  return (
    "Lease extensions did not reach the database in time (see the worker's error events): check the " +
    `database and the connection, or raise leaseMs.`
  );
}

/**
 * Emits `leaseLost` on the worker, or, when nobody listens (no listener, no `logger`), a
 * `LeaseholdWarning` process warning: a lost lease is never silent.
 */
export function announceLeaseLoss(
  worker: {
    listenerCount(event: 'leaseLost'): number;
    emit(event: 'leaseLost', job: ActiveJob, loss: LeaseLoss): boolean;
  },
  job: ActiveJob,
  loss: LeaseLoss,
): void {
  if (worker.listenerCount('leaseLost') > 0) worker.emit('leaseLost', job, loss);
  else
    process.emitWarning(`leasehold: ${loss.message}`, {
      type: 'LeaseholdWarning',
      code: 'LEASEHOLD_LEASE_LOST',
    });
}

/** Says once per run, loudly, that its lease was lost, with the job id and what to change. */
export function reportLossOnce(
  worker: Parameters<typeof announceLeaseLoss>[0],
  job: ActiveJob,
  config: Parameters<typeof describeLeaseLoss>[1] | undefined,
  reason: LeaseLossReason,
  timerLateMs: Parameters<typeof describeLeaseLoss>[3],
): void {
  if (job.lossReported || config === undefined) return;
  job.lossReported = true;
  announceLeaseLoss(worker, job, describeLeaseLoss(job, config, reason, timerLateMs));
}

/**
 * Says why a run's outcome came back `lost`: at once, unless the database refused a write this
 * process still thought held (`refused`), which a cancel that came before the run's next renewal
 * also causes: then one read (only then: never on the hot path) tells a cancel (`cancelled()`, no
 * lost lease reported) from a lost lease (`report('refused')`, also when that read fails).
 */
export function explainLostOutcome(
  job: ActiveJob,
  store: { readonly pool: Queryable; readonly schema: string },
  report: (reason: LeaseLossReason) => void,
  cancelled: () => void,
): void {
  const reason = lossReasonOf(job);
  if (reason !== 'refused' || job.lossReported) {
    report(reason);
    return;
  }
  void cancelledClaims(store.pool, store.schema, [job.lease])
    .catch(() => new Set<string>())
    .then((claims) => (claims.has(leaseKey(job.lease)) ? cancelled() : report(reason)));
}
