import {
  JobClaimMany,
  JobClaimManyFair,
  JobClaimManyLimited,
  JobClaimManyLimitedFair,
  JobClaimManyThrottled,
} from '../claim.js';

/** What every claim returns, with the types its function declares (ClaimedRow's columns). */
const CLAIMED = `id bigint, payload jsonb, lease_token bigint, lease_claim_id bigint, attempt_count integer,
  max_attempts integer, priority integer, job_uid uuid, lease_expires_ms double precision,
  available_ms double precision, plain boolean`;
/**
 * The claim statements as SECURITY DEFINER functions, for the worker role (issue 17): plain,
 * per-key, throttled, round-robin. Entries of FUNCTIONS (../functions.ts).
 */
export const CLAIM_FUNCTIONS = [
  {
    role: 'worker',
    statement: JobClaimMany,
    args: 'text, text, bigint, double precision, bigint, timestamptz',
    returns: CLAIMED,
  },
  {
    role: 'worker',
    statement: JobClaimManyLimited,
    args: 'text, text, bigint, double precision, bigint, bigint',
    returns: CLAIMED,
  },
  {
    // Rate and concurrency limits (015): the limiter rows are written only here, under the queue's
    // lock, so a worker cannot reset a window; the plain claims yield nothing for a limited queue.
    role: 'worker',
    statement: JobClaimManyThrottled,
    args: 'text, text, integer, double precision, bigint, bigint, double precision',
    returns: `${CLAIMED}, wait_ms double precision, throttled_by text`,
  },
  {
    role: 'worker',
    statement: JobClaimManyLimitedFair,
    args: 'text, text, bigint, double precision, integer, bigint',
    returns: `${CLAIMED}, turn bigint`,
  },
  {
    // Fairness (022): the cursor row is written only here; the plain claims ignore fairness.
    role: 'worker',
    statement: JobClaimManyFair,
    args: 'text, text, integer, double precision, bigint',
    returns: `${CLAIMED}, turn bigint`,
  },
] as const;
