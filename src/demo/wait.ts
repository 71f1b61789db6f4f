import { setTimeout as sleep } from 'node:timers/promises';

/** Options of `waitUntil`. */
export interface WaitOptions {
  /** Aborted by the demo's deadline or an interruption; its reason is rethrown, naming the wait. */
  signal: AbortSignal;
  /** What is awaited, for the error message. */
  what: string;
  /** Polling interval (default 50 ms). */
  intervalMs?: number;
}

/** Polls `check` until it returns true; throws (naming what was awaited) when `signal` aborts first. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  options: WaitOptions,
): Promise<void> {
  const { signal, what, intervalMs = 50 } = options;
  for (;;) {
    if (signal.aborted) throw abortError(signal, what);
    if (await check()) return;
    await sleep(intervalMs, undefined, { signal }).catch(() => {});
  }
}

/** The error a wait ends with when `signal` aborts: its reason, naming what was awaited. */
export function abortError(signal: AbortSignal, what: string): Error {
  const reason = signal.reason;
  const message = reason instanceof Error ? reason.message : String(reason);
  return new Error(`${message} (while waiting for ${what})`, { cause: reason });
}
