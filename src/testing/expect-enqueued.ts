import type { AnyTask, TaskPayload } from '../runtime/task.js';
import { rejectUnknownOptions } from '../shared/unknown-options.js';
import { assertQueueName, optionalInt, optionsObject } from '../shared/validation.js';
import { type PendingJob, readPendingJobs } from '../storage/jobs/pending.js';
import { TestExpectationError } from './errors.js';
import { matchesPayload, type PayloadMatch, preview } from './payload-match.js';

/** Options of `expectEnqueued`. */
export interface ExpectEnqueuedOptions {
  /** Exactly this many pending jobs must match (default: at least one). */
  count?: number;
  /** Pending jobs of the queue read, oldest first (1 to 10,000, default 1000). */
  limit?: number;
}

/** What `expectEnqueued` reads of a client: its pool and schema. */
export interface ClientLike {
  readonly pool: import('pg').Pool;
  readonly schema: string;
}

/** Pending payloads a failure message shows, each cut to 200 characters of JSON. */
const SHOWN = 10;

/**
 * Asserts that the task's (or queue's) pending jobs, claimable now or later, include one whose
 * payload matches `match` (a partial payload or a predicate; omitted: any job), or exactly
 * `count` of them; resolves with the matching jobs, oldest first. Otherwise throws a
 * `TestExpectationError` whose message shows the match and up to ten of that queue's pending
 * payloads (JSON, each cut to 200 characters): your test's own data, shown to help you see what
 * was enqueued instead. Payloads of other queues are never shown.
 */
export async function expectEnqueued<T extends AnyTask>(
  lh: ClientLike,
  task: T,
  match?: PayloadMatch<TaskPayload<T>>,
  options?: ExpectEnqueuedOptions,
): Promise<PendingJob[]>;
export async function expectEnqueued(
  lh: ClientLike,
  queue: string,
  match?: PayloadMatch<unknown>,
  options?: ExpectEnqueuedOptions,
): Promise<PendingJob[]>;
export async function expectEnqueued(
  lh: ClientLike,
  target: string | AnyTask,
  match?: unknown,
  given?: ExpectEnqueuedOptions,
): Promise<PendingJob[]> {
  const queue = typeof target === 'string' ? target : target?.name;
  assertQueueName(queue, typeof target === 'string' ? 'queue' : 'task');
  const options = optionsObject(given);
  rejectUnknownOptions(options, ['count', 'limit'], 'options');
  const count = options.count === undefined ? null : optionalInt(options.count, 'count', 0, 10_000, 1);
  const limit = optionalInt(options.limit, 'limit', 1, 10_000, 1000);
  const pending = await readPendingJobs(lh.pool, lh.schema, queue, limit);
  const matching = pending.filter((job) => match === undefined || matchesPayload(job.payload, match));
  if (count === null ? matching.length > 0 : matching.length === count) return matching;

  const wanted = match === undefined ? 'any payload' : describeMatch(match);
  const expected =
    count === null
      ? `a pending job of queue "${queue}" matching ${wanted}`
      : `${count} pending job${count === 1 ? '' : 's'} of queue "${queue}" matching ${wanted}`;
  throw new TestExpectationError(
    `expectEnqueued: expected ${expected}, found ${matching.length}. ${describePending(queue, pending, limit)}`,
  );
}

function describeMatch(match: unknown): string {
  if (typeof match !== 'function') return preview(match);
  return match.name ? `the predicate ${match.name}` : 'the predicate given';
}

function describePending(queue: string, pending: PendingJob[], limit: number): string {
  if (pending.length === 0) return `Queue "${queue}" has no pending job.`;
  const shown = pending
    .slice(0, SHOWN)
    .map((job) => `  #${job.id} ${preview(job.payload)}`)
    .join('\n');
  const more = pending.length > SHOWN ? `\n  … and ${pending.length - SHOWN} more` : '';
  const read = pending.length === limit ? ` (the first ${limit} read)` : '';
  return `Pending jobs of queue "${queue}"${read}:\n${shown}${more}`;
}
