import type { Lease } from '../../records/lease.js';
import { DEFAULT_MAX_PROGRESS_BYTES, DEFAULT_MAX_RESULT_BYTES } from '../../shared/defaults.js';
import { ValidationError } from '../../shared/errors.js';
import { MAX_PAYLOAD_BYTES_LIMIT, optionalInt, serialisePayload } from '../../shared/validation.js';
import type { CompleteRef } from '../../storage/leases/complete.js';
import { PermanentError } from './job-errors.js';

/** Error codes a worker stores when a handler's return value cannot be kept as its result. */
export const RESULT_ERROR_CODES = {
  /** The value is larger, as JSON, than the worker's `maxResultBytes`. */
  tooLarge: 'RESULT_TOO_LARGE',
  /** The value cannot be stored as JSON (a function, a BigInt, a cycle, a NUL character...). */
  notJson: 'RESULT_NOT_JSON',
} as const;

/** The bounds of what a running job hands back: its result and its progress details, in JSON bytes. */
export interface OutputLimits {
  maxResultBytes: number;
  maxProgressBytes: number;
}

/** Resolves the worker options `maxResultBytes` and `maxProgressBytes` (each 2 bytes to 8 MiB). */
export function resolveOutputLimits(options: {
  maxResultBytes?: number | undefined;
  maxProgressBytes?: number | undefined;
}): OutputLimits {
  return {
    maxResultBytes: optionalInt(
      options.maxResultBytes,
      'maxResultBytes',
      2,
      MAX_PAYLOAD_BYTES_LIMIT,
      DEFAULT_MAX_RESULT_BYTES,
    ),
    maxProgressBytes: optionalInt(
      options.maxProgressBytes,
      'maxProgressBytes',
      2,
      MAX_PAYLOAD_BYTES_LIMIT,
      DEFAULT_MAX_PROGRESS_BYTES,
    ),
  };
}

// Query libraries return BigInts from ordinary writes (Kysely's numInsertedOrUpdatedRows), and a
// handler often returns what its last write returned: stored as decimal text rather than refused.
const bigintAsText = (_key: string, value: unknown) => (typeof value === 'bigint' ? value.toString() : value);

/**
 * A handler's return value as the JSON text its completion stores; null when it returned nothing
 * (`undefined`), which stores no result and costs the completion nothing; a BigInt becomes its
 * decimal text. A value over `maxBytes`, or one JSON cannot carry (a cycle, a NUL character),
 * throws a `PermanentError` (`RESULT_TOO_LARGE`, `RESULT_NOT_JSON`): the attempt fails and the job goes dead, since running it again would return
 * the same. The message says how large or why, never what the value holds.
 */
export function resultText(value: unknown, maxBytes: number): string | null {
  if (value === undefined) return null;
  try {
    return serialisePayload(value, maxBytes, 'result', bigintAsText);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    const code = /over the limit/.test(err.message)
      ? RESULT_ERROR_CODES.tooLarge
      : RESULT_ERROR_CODES.notJson;
    throw new PermanentError(
      `the handler's return value cannot be stored as the job's result: ${err.message}`,
      {
        code,
      },
    );
  }
}

/**
 * A `job.progress(detail)` detail as JSON text; undefined for no detail. Throws `ValidationError`
 * (field `detail`) when it is over `maxBytes` or not JSON: nothing is stored, the lease is unchanged.
 */
export function progressText(detail: unknown, maxBytes: number): string | undefined {
  if (detail === undefined) return undefined;
  return serialisePayload(detail, maxBytes, 'detail');
}

/**
 * The completion of a run whose handler returned `value`: its lease, with the result when there is
 * one (see `resultText`, which throws for a value that cannot be kept; none for a run whose outcome
 * `job.transaction` already wrote), and whether its claim found it plain (storage/leases/complete.ts).
 */
export function completionOf(
  job: { lease: Lease; reported: boolean; plain: boolean },
  value: unknown,
  maxBytes: number,
): CompleteRef {
  const result = job.reported ? null : resultText(value, maxBytes);
  const { lease } = job;
  // A literal of one shape, not a spread of the lease: this runs once per job, and the spread was
  // 5% of a no-op drain's worker CPU.
  return {
    jobId: lease.jobId,
    token: lease.token,
    claimId: lease.claimId,
    owner: lease.owner,
    queue: lease.queue,
    result,
    plain: job.plain,
  };
}
