import { ValidationError } from '../../shared/errors.js';
import { MAX_EVENT_KEY } from '../../shared/limits.js';
import { serialisePayload } from '../../shared/validation.js';
import { MAX_SLEEP_MS } from './steps.js';

/** Longest event key, in characters (its home is shared/limits.ts, which storage's functions share). */
export { MAX_EVENT_KEY };
/** Largest event payload, as JSON bytes: 1 MiB. */
export const MAX_EVENT_PAYLOAD_BYTES = 1_048_576;
/** How long a sent event is kept for waits that begin after it: 24 hours. */
export const EVENT_RETENTION_MS = 86_400_000;

const EVENT_NAME = /^[A-Za-z0-9_.:-]{1,100}$/;

/** What `job.waitForEvent` resumes with: the event's payload, or that the timeout passed first. */
export type EventWaitResult<P = unknown> = { timedOut: false; payload: P } | { timedOut: true };

/** Options of `job.waitForEvent`: the event's key and how long to wait (ms, at most a year). */
export interface WaitForEventOptions {
  key: string;
  timeoutMs: number;
}

/** Checks an event name: 1 to 100 letters, digits or `_ - . :` (it names the wait's step too). */
export function eventName(name: unknown): string {
  if (typeof name !== 'string' || !EVENT_NAME.test(name)) {
    throw new ValidationError('event name', 'must be 1 to 100 letters, digits or _ - . :');
  }
  return name;
}

/** Checks an event key: a string of 1 to 200 characters. */
export function eventKey(key: unknown): string {
  if (typeof key !== 'string' || key.length < 1 || key.length > MAX_EVENT_KEY) {
    throw new ValidationError('event key', `must be a string of 1 to ${MAX_EVENT_KEY} characters`);
  }
  return key;
}

/** Checks `job.waitForEvent`'s options. */
export function waitOptions(options: unknown): { key: string; timeoutMs: number } {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('waitForEvent', 'give { key, timeoutMs }');
  }
  const { key, timeoutMs } = options as { key?: unknown; timeoutMs?: unknown };
  if (
    typeof timeoutMs !== 'number' ||
    !Number.isFinite(timeoutMs) ||
    timeoutMs < 0 ||
    timeoutMs > MAX_SLEEP_MS
  ) {
    throw new ValidationError(
      'waitForEvent timeoutMs',
      `must be a number of milliseconds from 0 to ${MAX_SLEEP_MS}`,
    );
  }
  return { key: eventKey(key), timeoutMs: Math.round(timeoutMs) };
}

/** An event's payload as stored JSON (undefined as null), at most `MAX_EVENT_PAYLOAD_BYTES`. */
export function eventPayloadText(payload: unknown): string {
  return serialisePayload(payload ?? null, MAX_EVENT_PAYLOAD_BYTES, 'event payload');
}
