import { LeaseholdError, LeaseLostError } from '../../shared/errors.js';

/**
 * Why a running job's signal was aborted: `cancelled` (an operator's or API cancel of the running
 * job), `lease-lost` (an extension was refused: the lease was taken over), `lease-deadline` (not
 * renewed in time), `max-runtime`, `shutdown` (the worker stopped past its grace period).
 */
export type AbortReason = 'cancelled' | 'lease-lost' | 'lease-deadline' | 'max-runtime' | 'shutdown';

/** The `signal.reason` of a run aborted for `reason`: its code says a cancel, a shutdown, or a lost lease. */
export function abortError(jobId: string, reason: AbortReason): Error {
  if (reason === 'cancelled')
    return new LeaseholdError('CANCELLED', `job ${jobId} was cancelled while it ran`);
  if (reason === 'shutdown') {
    return new LeaseholdError(
      'SHUTDOWN',
      `job ${jobId} was stopped at shutdown and handed back to run again`,
    );
  }
  const why =
    reason === 'max-runtime'
      ? 'it ran past its maximum runtime and was recorded as a retryable time-out'
      : reason === 'lease-deadline'
        ? 'its lease was not renewed in time'
        : 'its lease was taken over (an extension was refused)';
  return new LeaseLostError(`job ${jobId} was stopped (${reason}): ${why}`);
}
