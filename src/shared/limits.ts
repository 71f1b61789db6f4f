// The bounds that the runtime checks and that storage's SECURITY DEFINER functions repeat
// (storage/roles/function-bounds.ts): one home below both rooms, so that storage imports nothing above it.

/** Longest stored error message, in characters. */
export const MAX_ERROR_MESSAGE = 1000;
/** Longest stored stack trace, in characters. */
export const MAX_ERROR_STACK = 4000;
/** Longest step or sleep name, in characters (before its `#n` occurrence number). */
export const MAX_STEP_NAME = 100;
/** Most steps and sleeps one job may record, over all its attempts. */
export const MAX_STEPS = 1000;
/** Longest `job.sleep`, in milliseconds: one year (a sleep costs a row, not a process). */
export const MAX_SLEEP_MS = 365 * 86_400_000;
/** Longest event key, in characters. */
export const MAX_EVENT_KEY = 200;
