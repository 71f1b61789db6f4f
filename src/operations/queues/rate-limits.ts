import { ValidationError } from '../../shared/errors.js';
import { assertInt, rejectUnknownOptions } from '../../shared/validation.js';

/** A queue's rate limit: at most `max` jobs start in any interval of `perMs` milliseconds. */
export interface RateLimit {
  /** Starts allowed per window (1 to 10,000). */
  max: number;
  /** The window, in milliseconds (1 ms to one day). */
  perMs: number;
  /** Count starts per `concurrencyKey` (jobs without a key share one allowance); default false. */
  perKey?: boolean;
}

/** Most starts a rate limit allows per window: each start of a window is kept until it leaves it. */
export const MAX_RATE_LIMIT = 10_000;
/** Longest rate-limit window: one day. */
export const MAX_RATE_WINDOW_MS = 86_400_000;
/** Largest `concurrencyLimit`. */
export const MAX_CONCURRENCY_LIMIT = 100_000;

/** Checks `configureQueue`'s `rateLimit`: an object with `max`, `perMs` and optionally `perKey`, or null. */
export function parseRateLimit(value: unknown): { max: number; perMs: number; perKey: boolean } | null {
  if (value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value))
    throw new ValidationError('config.rateLimit', 'must be { max, perMs, perKey? } or null');
  rejectUnknownOptions(value as Record<string, unknown>, ['max', 'perMs', 'perKey'], 'config.rateLimit');
  const given = value as Partial<RateLimit>;
  const max = assertInt(given.max, 'config.rateLimit.max', 1, MAX_RATE_LIMIT);
  const perMs = assertInt(given.perMs, 'config.rateLimit.perMs', 1, MAX_RATE_WINDOW_MS);
  if (given.perKey !== undefined && typeof given.perKey !== 'boolean')
    throw new ValidationError('config.rateLimit.perKey', 'must be true or false');
  return { max, perMs, perKey: given.perKey ?? false };
}

/** Checks `configureQueue`'s `concurrencyLimit`: an integer from 1, or null. */
export function parseConcurrencyLimit(value: unknown): number | null {
  return value === null ? null : assertInt(value, 'config.concurrencyLimit', 1, MAX_CONCURRENCY_LIMIT);
}
