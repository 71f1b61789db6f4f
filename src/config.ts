import { ValidationError } from './errors.js';
import { assertInt } from './validation.js';

/** Retry backoff: full jitter over an exponential curve, capped. */
export interface BackoffOptions {
  /** Delay scale of the first retry, in ms. */
  baseMs?: number;
  /** Largest delay, in ms. */
  maxMs?: number;
}

/** Default retry backoff: the first retry within a second, none later than an hour. */
export const DEFAULT_BACKOFF: Required<BackoffOptions> = { baseMs: 1000, maxMs: 3_600_000 };
/** Default lease length. */
export const DEFAULT_LEASE_MS = 60_000;
/** Default attempts per job. */
export const DEFAULT_MAX_ATTEMPTS = 8;
/** Largest max_attempts accepted. */
export const MAX_ATTEMPTS_LIMIT = 1000;
/** Longest lease accepted: a day. Longer work should renew. */
export const MAX_LEASE_MS = 86_400_000;

/** Validates backoff options, filling in defaults. */
export function resolveBackoff(
  options: BackoffOptions | undefined,
  field: string,
  defaults: Required<BackoffOptions> = DEFAULT_BACKOFF,
): Required<BackoffOptions> {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new ValidationError(field, 'must be an object like { baseMs, maxMs }');
  }
  const baseMs =
    options?.baseMs === undefined
      ? defaults.baseMs
      : assertInt(options.baseMs, `${field}.baseMs`, 0, MAX_LEASE_MS);
  const maxMs =
    options?.maxMs === undefined
      ? Math.max(defaults.maxMs, baseMs)
      : assertInt(options.maxMs, `${field}.maxMs`, 0, 30 * MAX_LEASE_MS);
  if (maxMs < baseMs) throw new ValidationError(`${field}.maxMs`, 'must not be below baseMs');
  return { baseMs, maxMs };
}

/** Validates a lease length in ms. */
export function assertLeaseMs(value: unknown, field: string): number {
  return assertInt(value, field, 1, MAX_LEASE_MS);
}
