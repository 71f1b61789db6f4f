import type { LeaseholdContext } from '../../context/context.js';
import { ValidationError } from '../../shared/errors.js';
import { assertQueueName, assertText, optionalInt } from '../../shared/validation.js';
import {
  listOperatorActions,
  setQueuePausedAudited,
  setSchedulePausedAudited,
} from '../../storage/operator/operator-actions.js';
import { assertKnownQueue } from '../queues/known-queues.js';

/** Who pauses or resumes, and why: both recorded in the operator action log. */
export interface OperatorActionOptions {
  actor?: string | null;
  reason?: string | null;
}

/** One entry of the operator action log (pauses and resumes of queues and schedules). */
export interface OperatorAction {
  id: string;
  at: Date;
  actor: string | null;
  action: 'pause' | 'resume';
  targetKind: 'queue' | 'schedule';
  target: string;
  reason: string | null;
}

function audit(options: OperatorActionOptions) {
  return {
    actor: options.actor == null ? null : assertText(options.actor, 'actor', 200),
    reason: options.reason == null ? null : assertText(options.reason, 'reason', 1000),
  };
}

/**
 * Pauses or resumes a queue, recorded with actor and reason in the same statement. A queue that is
 * not known is refused with `QueueNotFoundError`, as `lh.pauseQueue` refuses it: the dashboard's
 * buttons name known queues, and a hand-made request must not leave a phantom queue either.
 */
export async function pauseQueueAudited(
  context: LeaseholdContext,
  queue: string,
  paused: boolean,
  options: OperatorActionOptions = {},
): Promise<{ name: string; paused: boolean }> {
  assertQueueName(queue);
  const checked = audit(options);
  await assertKnownQueue(context.pool, context.schema, queue);
  return setQueuePausedAudited(context.pool, context.schema, queue, paused, checked);
}

/** Pauses or resumes a schedule, recorded with actor and reason in the same statement. */
export async function pauseScheduleAudited(
  context: LeaseholdContext,
  name: string,
  paused: boolean,
  options: OperatorActionOptions = {},
): Promise<{ name: string; paused: boolean }> {
  assertQueueName(name, 'name');
  const checked = audit(options);
  if (!(await setSchedulePausedAudited(context.pool, context.schema, name, paused, checked))) {
    throw new ValidationError('name', `names no schedule (${JSON.stringify(name)})`);
  }
  return { name, paused };
}

/** The latest operator actions (default 20, at most 1000), newest first. */
export async function operatorActions(
  context: LeaseholdContext,
  options: { limit?: number } = {},
): Promise<OperatorAction[]> {
  const limit = optionalInt(options.limit, 'limit', 1, 1000, 20);
  const rows = await listOperatorActions(context.pool, context.schema, limit);
  return rows.map((r) => ({
    id: r.id,
    at: r.at,
    actor: r.actor,
    action: r.action,
    targetKind: r.target_kind,
    target: r.target,
    reason: r.reason,
  }));
}
