import type { EnqueueItem, EnqueueOptions, EnqueueResult } from '../../context/client-options.js';
import type { LeaseholdContext } from '../../context/context.js';
import { assertPayloadMatches } from '../../runtime/run/payload-schema.js';
import type { AnyTask } from '../../runtime/task.js';
import { ValidationError } from '../../shared/errors.js';
import { MAX_ENQUEUE_MANY } from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import { enqueue, enqueueMany } from './enqueue.js';

/**
 * `lh.enqueue(task, payload)`: validates the payload against the task's schema (a
 * `ValidationError` naming the task and the first issue, nothing written), then enqueues it to the
 * task's queue exactly as `lh.enqueue(task.name, payload)` does. The payload is stored as given:
 * the worker validates it again at claim and hands the handler the schema's output.
 */
export async function enqueueTask(
  context: LeaseholdContext,
  task: AnyTask,
  payload: unknown,
  options?: EnqueueOptions,
): Promise<EnqueueResult> {
  assertTask(task);
  if (task.schema !== undefined) await assertPayloadMatches(task.name, task.schema, payload, 'payload');
  return enqueue(context, task.name, payload, options);
}

/** `lh.enqueueMany(task, items)`: every payload validated first (all or nothing), then one statement. */
export async function enqueueTaskMany(
  context: LeaseholdContext,
  task: AnyTask,
  items: readonly EnqueueItem[],
  options?: { client?: Queryable },
): Promise<{ ids: string[] }> {
  assertTask(task);
  const { schema } = task;
  // A batch enqueueMany refuses anyway (not an array, too long) is not validated item by item.
  if (schema !== undefined && Array.isArray(items) && items.length <= MAX_ENQUEUE_MANY) {
    for (const [index, item] of items.entries()) {
      if (typeof item !== 'object' || item === null) continue; // enqueueMany names it
      await assertPayloadMatches(task.name, schema, item.payload, `items[${index}].payload`);
    }
  }
  return enqueueMany(context, task.name, items, options);
}

function assertTask(task: AnyTask): void {
  if (typeof task !== 'object' || task === null || typeof task.name !== 'string' || !task.queue) {
    throw new ValidationError('task', 'must be a queue name or a task made by defineTask');
  }
}
