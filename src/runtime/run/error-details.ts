import { MAX_ERROR_MESSAGE, MAX_ERROR_STACK } from '../../shared/limits.js';
import { bounded, sanitiseErrorCode } from '../../shared/validation.js';

/** The stored error's bounds (their home is shared/limits.ts, which storage's functions share). */
export { MAX_ERROR_MESSAGE, MAX_ERROR_STACK };

/** Bounded diagnostics of an error, as stored on the job. */
export interface ErrorDetails {
  errorCode: string;
  errorClass: string | null;
  errorMessage: string | null;
  errorStack: string | null;
}

/**
 * Extracts a short code, the class name, and a bounded message and stack from anything thrown.
 * Nothing else of the error (and so nothing of the payload it may reference) is kept.
 */
export function describeError(error: unknown, codeOverride?: string): ErrorDetails {
  if (error instanceof Error) {
    const ownCode = (error as { code?: unknown }).code;
    return {
      errorCode: sanitiseErrorCode(codeOverride ?? ownCode, 'ERROR'),
      errorClass: bounded(error.name || error.constructor?.name, 100),
      errorMessage: bounded(error.message, MAX_ERROR_MESSAGE),
      errorStack: bounded(error.stack, MAX_ERROR_STACK),
    };
  }
  return {
    errorCode: sanitiseErrorCode(codeOverride, 'ERROR'),
    errorClass: typeof error,
    errorMessage: bounded(typeof error === 'string' ? error : safeString(error), MAX_ERROR_MESSAGE),
    errorStack: null,
  };
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return 'unprintable value';
  }
}
