import type { ClaimOptions, FailOptions } from '../../context/client-options.js';
import { connectionFor, type LeaseholdContext } from '../../context/context.js';
import { type Lease, leaseFromRow } from '../../records/lease.js';
import { describeError } from '../../runtime/run/error-details.js';
import { assertLeaseMs, MAX_ATTEMPTS_LIMIT } from '../../shared/config.js';
import { DEFAULT_CLAIM_LIMIT, DEFAULT_LEASE_MS } from '../../shared/defaults.js';
import { ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import {
  assertClaimId,
  assertInt,
  assertJobId,
  assertOwner,
  assertQueueName,
  MAX_BATCH,
  optionalBoolean,
  optionalInt,
  optionsObject,
} from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import { leaseKey } from '../../storage/fence.js';
import { completeJobs } from '../../storage/leases/complete.js';
import { type FailOutcome, failJobs, snoozeJobs } from '../../storage/leases/fail.js';
import { extendLeases } from '../../storage/leases/heartbeat.js';

export type { FailOutcome } from '../../storage/leases/fail.js';

const CLAIM_OPTIONS: readonly (keyof ClaimOptions)[] = ['queue', 'owner', 'limit', 'leaseMs'];
const FAIL_OPTIONS: readonly (keyof FailOptions)[] = [
  'retryable',
  'delayMs',
  'attemptBudget',
  'code',
  'client',
];

/** `lh.claim`: up to `limit` jobs of a queue in one statement, committed at once. */
export async function claim(context: LeaseholdContext, claimOptions: ClaimOptions): Promise<Lease[]> {
  const options = optionsObject(claimOptions);
  rejectUnknownOptions(options, CLAIM_OPTIONS, 'options');
  assertQueueName(options.queue);
  assertOwner(options.owner);
  const limit = optionalInt(options.limit, 'limit', 1, MAX_BATCH, DEFAULT_CLAIM_LIMIT);
  const leaseMs = optionalLeaseMs(options.leaseMs);
  const rows = await context.claims.claim({ queue: options.queue, owner: options.owner, limit, leaseMs });
  return rows.map((row) => leaseFromRow(row, options.queue, options.owner));
}

/** `lh.heartbeat`: extends a lease from now; false when it is lost. */
export async function heartbeat(
  context: LeaseholdContext,
  lease: Lease,
  heartbeatOptions?: { leaseMs?: number; client?: Queryable },
): Promise<boolean> {
  const canonical = assertLease(lease);
  const options = optionsObject(heartbeatOptions);
  rejectUnknownOptions(options, ['leaseMs', 'client'], 'options');
  const leaseMs = optionalLeaseMs(options.leaseMs);
  const db = connectionFor(context, options.client);
  const extended = await extendLeases(db, context.schema, [{ ...canonical, leaseMs }]);
  const expiresAt = extended.get(leaseKey(canonical));
  if (expiresAt) lease.expiresAt = expiresAt;
  return expiresAt !== undefined;
}

/** `lh.complete`: marks the job succeeded; false when the lease was lost and nothing changed. */
export async function complete(
  context: LeaseholdContext,
  lease: Lease,
  options?: { client?: Queryable },
): Promise<boolean> {
  const canonical = assertLease(lease);
  const accepted = await completeJobs(connectionFor(context, clientOption(options)), context.schema, [
    canonical,
  ]);
  return accepted.has(canonical.jobId);
}

/** `lh.completeMany`: many leases in one fenced statement; returns the ids whose completion was accepted. */
export async function completeMany(
  context: LeaseholdContext,
  leases: readonly Lease[],
  options?: { client?: Queryable },
): Promise<Set<string>> {
  const db = connectionFor(context, clientOption(options));
  if (!Array.isArray(leases) || leases.length > MAX_BATCH) {
    throw new ValidationError('leases', `must be an array of at most ${MAX_BATCH} leases`);
  }
  // The statement answers by job id: two claims of one job in one call could not be told apart.
  const jobs = new Set<string>();
  const canonical = leases.map((lease) => {
    const checked = assertLease(lease);
    if (jobs.has(checked.jobId)) {
      throw new ValidationError(
        'leases',
        `hold two claims of job ${checked.jobId}: complete each in a call of its own`,
      );
    }
    jobs.add(checked.jobId);
    return checked;
  });
  return completeJobs(db, context.schema, canonical);
}

/** `lh.fail`: records a failed attempt as `retry`, `dead` or `lost` (the lease was lost; nothing changed). */
export async function fail(
  context: LeaseholdContext,
  lease: Lease,
  error: unknown,
  failOptions?: FailOptions,
): Promise<FailOutcome> {
  const canonical = assertLease(lease);
  const options = optionsObject(failOptions);
  rejectUnknownOptions(options, FAIL_OPTIONS, 'options');
  const details = describeError(error, options.code);
  const outcomes = await failJobs(connectionFor(context, options.client), context.schema, [
    {
      ...canonical,
      retryable: optionalBoolean(options.retryable, 'retryable', true),
      delayMs:
        options.delayMs === undefined ? null : assertInt(options.delayMs, 'delayMs', 0, 30 * 86_400_000),
      baseMs: context.backoff.baseMs,
      maxMs: context.backoff.maxMs,
      attemptBudget:
        options.attemptBudget === undefined
          ? null
          : assertInt(options.attemptBudget, 'attemptBudget', 1, MAX_ATTEMPTS_LIMIT),
      ...details,
    },
  ]);
  return outcomes.get(canonical.jobId) ?? 'lost';
}

/**
 * `lh.snooze`: ends this run and makes the job claimable again after `delayMs`, spending no
 * attempt; false when the lease was lost and nothing changed. With `client`, joins that transaction.
 */
export async function snooze(
  context: LeaseholdContext,
  lease: Lease,
  delayMs: number,
  snoozeOptions?: { client?: Queryable },
): Promise<boolean> {
  const canonical = assertLease(lease);
  const ms = assertInt(delayMs, 'delayMs', 0, 30 * 86_400_000);
  const db = connectionFor(context, clientOption(snoozeOptions));
  const accepted = await snoozeJobs(db, context.schema, [{ ...canonical, delayMs: ms }]);
  return accepted.has(canonical.jobId);
}

function optionalLeaseMs(value: number | undefined): number {
  return value === undefined ? DEFAULT_LEASE_MS : assertLeaseMs(value, 'leaseMs');
}

function clientOption(options: { client?: Queryable } | undefined): Queryable | undefined {
  const opts = optionsObject(options);
  rejectUnknownOptions(opts, ['client'], 'options');
  return opts.client;
}

/**
 * Throws unless `lease` is a Lease; returns it with its id and token in canonical digits, the
 * text the statements answer with (a lease rebuilt by hand with `jobId: '007'` is job 7's).
 */
function assertLease(lease: Lease): Lease {
  if (typeof lease !== 'object' || lease === null)
    throw new ValidationError('lease', 'must be a Lease from claim()');
  const jobId = assertJobId(lease.jobId, 'lease.jobId');
  const token = assertJobId(lease.token, 'lease.token');
  assertClaimId(lease.claimId);
  assertOwner(lease.owner);
  assertQueueName(lease.queue, 'lease.queue');
  return jobId === lease.jobId && token === lease.token ? lease : { ...lease, jobId, token };
}
