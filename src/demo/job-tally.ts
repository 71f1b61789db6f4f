import type { Leasehold } from '../index.js';

/** Where the demo's jobs stand while it runs. */
export interface Progress {
  /** Jobs that reached a final state (succeeded, dead, ...). */
  finished: number;
  pending: number;
  running: number;
}

/**
 * Reads progress with `lh.listQueues()`: one read-only statement over the live jobs. A job that is
 * neither pending nor running has finished (succeeded jobs leave the live table altogether). Its
 * cost grows with the backlog; a few thousand demo jobs make polling it a few times a second cheap.
 * The end result is not inferred from these counts: `tallyJobs` reads every job back by id.
 */
export async function readProgress(
  lh: Leasehold,
  queues: readonly string[],
  total: number,
): Promise<Progress> {
  let pending = 0;
  let running = 0;
  for (const queue of await lh.listQueues()) {
    if (!queues.includes(queue.name)) continue;
    pending += queue.pending;
    running += queue.running;
  }
  return { finished: total - pending - running, pending, running };
}

/** Every job of one queue, read back one by one at the end. */
export interface QueueTally {
  queue: string;
  total: number;
  succeeded: number;
  dead: number;
  pending: number;
  running: number;
  /** Jobs the database no longer knows: lost. */
  missing: number;
  /** Any other final state. */
  other: number;
  /** Attempts beyond the first: the sum of attemptCount - 1. */
  retries: number;
}

const READ_CONCURRENCY = 8;

/**
 * Reads every enqueued job back with `lh.getJob`: proof by id that each one exists and succeeded,
 * rather than an inference from counts, and the attempts each one took.
 */
export async function tallyJobs(
  lh: Leasehold,
  idsByQueue: ReadonlyMap<string, string[]>,
): Promise<QueueTally[]> {
  const tallies: QueueTally[] = [];
  for (const [queue, ids] of idsByQueue) {
    const tally: QueueTally = {
      queue,
      total: ids.length,
      succeeded: 0,
      dead: 0,
      pending: 0,
      running: 0,
      missing: 0,
      other: 0,
      retries: 0,
    };
    let next = 0;
    const readNext = async () => {
      while (next < ids.length) {
        const job = await lh.getJob(ids[next++] as string);
        if (!job) {
          tally.missing++;
          continue;
        }
        tally.retries += Math.max(0, job.attemptCount - 1);
        if (
          job.status === 'succeeded' ||
          job.status === 'dead' ||
          job.status === 'pending' ||
          job.status === 'running'
        ) {
          tally[job.status]++;
        } else {
          tally.other++;
        }
      }
    };
    await Promise.all(Array.from({ length: READ_CONCURRENCY }, readNext));
    tallies.push(tally);
  }
  return tallies;
}
