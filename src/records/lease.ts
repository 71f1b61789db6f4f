import type { ClaimedRow } from '../storage/leases/claim.js';

/** A claimed job: the right to work on it until `expiresAt`, proven by `owner` and `token`. */
export interface Lease {
  /** The job's id (a bigint, as a string). */
  jobId: string;
  /** The queue the job was claimed from. */
  queue: string;
  /** The job's payload, as stored. */
  payload: unknown;
  /** Who holds the lease. */
  owner: string;
  /** Fencing token of this claim (a bigint, as a string); every later write must present it. */
  token: string;
  /** Random id of the claim that issued this lease (a 64-bit integer, as a string); presented with the token. */
  claimId: string;
  /** Which attempt this is, from 1. */
  attempt: number;
  /** Attempts allowed in all. */
  maxAttempts: number;
  /** When the lease lapses, in database time. */
  expiresAt: Date;
}

/** The one place a claimed row becomes a `Lease` (for `lh.claim` and the worker alike). */
export function leaseFromRow(row: ClaimedRow, queue: string, owner: string): Lease {
  return {
    jobId: row.id,
    queue,
    payload: row.payload,
    owner,
    token: row.lease_token,
    claimId: row.lease_claim_id,
    attempt: row.attempt_count,
    maxAttempts: row.max_attempts,
    expiresAt: new Date(row.lease_expires_ms),
  };
}
