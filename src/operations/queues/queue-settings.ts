import type { LeaseholdContext } from '../../context/context.js';
import {
  assertQueueName,
  optionalBoolean,
  optionsObject,
  rejectUnknownOptions,
} from '../../shared/validation.js';
import { assertKnownQueue } from './known-queues.js';
import { configureQueue, type QueueConfig, type QueueSettings } from './queues.js';

/** Options of `lh.pauseQueue` and `lh.resumeQueue`. */
export interface PauseOptions {
  /**
   * Pause (or resume) a queue that is not known yet, e.g. before its first job; without it, an
   * unknown name is refused with `QueueNotFoundError` (a typo must not create a phantom queue).
   */
  create?: boolean;
}

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

/**
 * `lh.pauseQueue` and `lh.resumeQueue`: stops or restarts claims from `queue`; running jobs finish.
 * An unknown queue is refused (`QUEUE_NOT_FOUND`, with the closest names) unless `create` is set.
 */
export async function setQueuePaused(
  context: LeaseholdContext,
  queue: string,
  paused: boolean,
  given?: PauseOptions,
): Promise<QueueSettings> {
  const options = optionsObject(given);
  rejectUnknownOptions(options, ['create'], 'options');
  const create = optionalBoolean(options.create, 'options.create', false);
  assertQueueName(queue);
  if (!create) await assertKnownQueue(context.pool, context.schema, queue);
  return configureQueue(context.pool, context.schema, queue, { paused });
}
