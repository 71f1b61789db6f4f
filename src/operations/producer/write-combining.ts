import type { EnqueueResult } from '../../context/client-options.js';
import type { LeaseholdContext } from '../../context/context.js';
import type { CombinedEntry, SendCombined } from '../../context/enqueue-combiner.js';
import { insertJob, insertJobs, insertKeyedJobs, type NewJob } from '../../storage/jobs/enqueue.js';
import { retryWhileAnswerLost } from './answer-lost.js';

// The statements of combined autonomous enqueues (issue 39; the mechanism is src/context/enqueue-combiner.ts):
// which calls may share one, and how each caller gets its own answer from it.

/** One autonomous enqueue's validated row, and its idempotency key (null: a plain job). */
export interface CombinedItem {
  readonly job: NewJob;
  readonly key: string | null;
}

/**
 * The group of a call: calls of one queue and one kind share a statement. Plain jobs (any priority,
 * run time, attempts, concurrency or fairness key) go in one batch insert; keyed jobs in one keyed
 * insert. Ordering keys and dedupe are not combined: their statements take key locks whose order a
 * mixed batch would have to reason about, and they are sent as before.
 */
export function combinedGroup(queue: string, item: CombinedItem): string {
  return `${item.key === null ? 'plain' : 'keyed'}\u0000${queue}`;
}

/** Sends the enqueue of `item` through the context's combiner; resolves once its row committed. */
export function enqueueCombined(
  context: LeaseholdContext,
  queue: string,
  item: CombinedItem,
): Promise<EnqueueResult> {
  const combiner = context.enqueues as NonNullable<LeaseholdContext['enqueues']>;
  return combiner.submit(combinedGroup(queue, item), item, item.job.payloadJson.length, sendFor(context));
}

const senders = new WeakMap<LeaseholdContext, SendCombined<CombinedItem, EnqueueResult>>();

/** The one send function of a context (a group's calls all pass the same one). */
function sendFor(context: LeaseholdContext): SendCombined<CombinedItem, EnqueueResult> {
  let send = senders.get(context);
  if (!send) {
    send = (group, batch) => {
      const queue = group.slice(group.indexOf('\u0000') + 1);
      return (batch[0] as CombinedEntry<CombinedItem, EnqueueResult>).item.key === null
        ? sendPlain(context, queue, batch)
        : sendKeyed(context, queue, batch);
    };
    senders.set(context, send);
  }
  return send;
}

/**
 * Plain rows: one row alone runs the single-row statement a call without combining runs (so an idle
 * producer's latency is unchanged), more run one batch insert (ids in input order). The wake-up is
 * coalesced per queue as for any autocommit enqueue (src/context/wakeup-coalescer.ts).
 */
async function sendPlain(
  context: LeaseholdContext,
  queue: string,
  batch: readonly CombinedEntry<CombinedItem, EnqueueResult>[],
): Promise<void> {
  const { pool, schema, wakeups } = context;
  const notify = wakeups.notifyInline(queue);
  const ids =
    batch.length === 1
      ? [
          await insertJob(
            pool,
            schema,
            queue,
            (batch[0] as CombinedEntry<CombinedItem, EnqueueResult>).item.job,
            { notify },
          ),
        ]
      : await insertJobs(
          pool,
          schema,
          queue,
          batch.map((entry) => entry.item.job),
          { notify },
        );
  if (!notify) wakeups.quietInsertCommitted(queue);
  for (const [i, entry] of batch.entries()) entry.resolve({ id: ids[i] as string, created: true });
}

/**
 * Keyed rows: the keyed insert takes each key once, so callers of the same key share its row: the
 * first of them is answered as a call alone would be (`created` true when this statement made the
 * job), the later ones `created: false`, as if they had come after it. Sent again while its answer
 * is lost, as a keyed enqueue alone is: the keys make that safe.
 */
async function sendKeyed(
  context: LeaseholdContext,
  queue: string,
  batch: readonly CombinedEntry<CombinedItem, EnqueueResult>[],
): Promise<void> {
  const { pool, schema } = context;
  const rowOfKey = new Map<string, number>();
  const jobs: NewJob[] = [];
  const keys: string[] = [];
  for (const { item } of batch) {
    const key = item.key as string;
    if (rowOfKey.has(key)) continue;
    rowOfKey.set(key, jobs.length);
    jobs.push(item.job);
    keys.push(key);
  }
  const answers = await retryWhileAnswerLost(() => insertKeyedJobs(pool, schema, queue, jobs, keys));
  const answered = new Set<string>();
  for (const entry of batch) {
    const key = entry.item.key as string;
    const answer = answers[rowOfKey.get(key) as number] as { id: string; created: boolean };
    entry.resolve({ id: answer.id, created: answer.created && !answered.has(key) });
    answered.add(key);
  }
}
