import { CONNECTION_GONE, LEAVE_SERVER } from '../../connection/primary.js';
import { DatabaseError } from '../../shared/errors.js';

/**
 * Delays before each new attempt of a statement whose answer was lost: enough for a pool to leave a
 * demoted or crashed server and for the host list to find the new primary (measured at 0.2 to 0.7 s
 * in test/runtime/failover.test.ts), bounded so that a caller is not kept waiting long.
 */
const RETRY_DELAYS_MS = [100, 400, 1600];

/** Driver messages of a connection that ended or timed out before its statement was answered. */
const CONNECTION_ENDED = /Connection terminated|Query read timeout|timeout exceeded when trying to connect/i;

/**
 * True when a failed statement's error says its connection or server went away (a demoted or
 * crashed primary, a cut network): the statement may or may not have committed, and only an
 * idempotent one may be sent again.
 */
export function answerLost(err: unknown): boolean {
  if (!(err instanceof DatabaseError)) return false;
  const state = err.sqlState;
  if (state !== undefined && (state.startsWith('08') || LEAVE_SERVER.has(state))) return true;
  const cause = err.cause as { code?: unknown; message?: unknown } | undefined;
  if (typeof cause?.code === 'string' && CONNECTION_GONE.has(cause.code)) return true;
  return typeof cause?.message === 'string' && CONNECTION_ENDED.test(cause.message);
}

/**
 * Sends an idempotent statement, and again (up to three more times, after 0.1, 0.4 and 1.6 s) while
 * its answer is lost to a connection or server that went away. Only for statements whose repeat
 * changes nothing: an enqueue under an idempotency key finds the job its first attempt created.
 */
export async function retryWhileAnswerLost<T>(send: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      const delay = RETRY_DELAYS_MS[attempt];
      if (delay === undefined || !answerLost(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
