import { QueueNotFoundError } from '../../shared/errors.js';
import { closestNames } from '../../shared/unknown-options.js';
import { assertQueueName } from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import { forgetQueueRow, isKnownQueue, knownQueueNames } from '../../storage/queues/known-queues.js';

// Names read to suggest from, at most: a typo's neighbours are found among the first ten thousand.
const SUGGESTION_NAMES = 10_000;

/**
 * Refuses a queue that is not known (storage/queues/known-queues.ts) with `QueueNotFoundError`, naming
 * the known queues spelt nearest: what turns `pause emials` into "did you mean emails?" instead of
 * a new, paused, phantom queue. One index probe per job table when the queue is known.
 */
export async function assertKnownQueue(db: Queryable, schema: string, queue: string): Promise<void> {
  assertQueueName(queue);
  if (await isKnownQueue(db, schema, queue)) return;
  const names = await knownQueueNames(db, schema, SUGGESTION_NAMES);
  throw new QueueNotFoundError(queue, closestNames(queue, names, 3));
}

/**
 * `lh.forgetQueue`: forgets a known queue that no longer exists (no job in any state, no schedule):
 * its settings row goes, and it leaves listings. False when it still has jobs or a schedule, or was
 * known only through them.
 */
export async function forgetQueue(db: Queryable, schema: string, queue: string): Promise<boolean> {
  assertQueueName(queue);
  return forgetQueueRow(db, schema, queue);
}
