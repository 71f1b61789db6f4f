import { DEFAULT_BACKOFF } from './defaults.js';
import { ValidationError } from './errors.js';
import { rejectUnknownOptions } from './unknown-options.js';
import { assertInt } from './validation.js';

/** Retry backoff: full jitter over an exponential curve, capped. */
export interface BackoffOptions {
  /** Delay scale of the first retry, in ms. */
  baseMs?: number;
  /** Largest delay, in ms. */
  maxMs?: number;
}

export { DEFAULT_BACKOFF, DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS } from './defaults.js';
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
  if (options !== undefined) rejectUnknownOptions(options, ['baseMs', 'maxMs'], field);
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
