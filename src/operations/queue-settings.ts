import type { LeaseholdContext } from '../context.js';
import { configureQueue, type QueueConfig, type QueueSettings } from './queues.js';

/**
 * `lh.configureQueue`: creates or changes a queue's settings, and makes `lh.claim` read the queue's
 * claim settings afresh (its cached per-key limit and aging).
 */
export async function configureQueueSettings(
  context: LeaseholdContext,
  queue: string,
  config: QueueConfig,
): Promise<QueueSettings> {
  context.claims.forget(queue);
  return configureQueue(context.pool, context.schema, queue, config);
}

/** `lh.pauseQueue` and `lh.resumeQueue`: stops or restarts claims from `queue`; running jobs finish. */
export async function setQueuePaused(
  context: LeaseholdContext,
  queue: string,
  paused: boolean,
): Promise<QueueSettings> {
  return configureQueue(context.pool, context.schema, queue, { paused });
}
