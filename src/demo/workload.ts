import { setTimeout as sleep } from 'node:timers/promises';
import type { EnqueueItem, JobContext, JobHandler } from '../index.js';
import { RetryableError } from '../index.js';
import { DEMO_QUEUES, type DemoQueue } from './settings.js';

/** What a demo job asks of its handler. */
export interface DemoPayload {
  /** The job's number, from 0. */
  n: number;
  /** How long the handler "works", in ms. */
  workMs: number;
  /** Fail the first attempt: with a RetryableError, or with a plain Error (an unclassified failure). */
  failFirst?: 'retryable' | 'error';
}

// Each queue works for a different while, so they progress at different paces.
const WORK_MS: Record<DemoQueue, readonly [min: number, max: number]> = {
  emails: [10, 30],
  thumbnails: [20, 50],
  webhooks: [5, 25],
};

/** Every 17th job fails its first attempt with a RetryableError, every 29th with a plain Error. */
function failureOf(n: number): DemoPayload['failFirst'] {
  if (n % 17 === 5) return 'retryable';
  if (n % 29 === 11) return 'error';
  return undefined;
}

/** The jobs to enqueue, `total` of them dealt round-robin over the queues. Deterministic. */
export function demoJobs(total: number): Map<DemoQueue, EnqueueItem[]> {
  const jobs = new Map<DemoQueue, EnqueueItem[]>(DEMO_QUEUES.map((queue) => [queue, []]));
  for (let n = 0; n < total; n++) {
    const queue = DEMO_QUEUES[n % DEMO_QUEUES.length] as DemoQueue;
    const [min, max] = WORK_MS[queue];
    const payload: DemoPayload = { n, workMs: min + ((n * 7919) % (max - min + 1)) };
    const failFirst = failureOf(n);
    if (failFirst) payload.failFirst = failFirst;
    jobs.get(queue)?.push({ payload });
  }
  return jobs;
}

/**
 * The handler of every demo queue: works for `workMs` (giving up if its signal is aborted, as a
 * well-behaved handler does) and fails the first attempt when the payload says so.
 */
export const demoHandler: JobHandler = async (job: JobContext) => {
  const payload = job.payload as DemoPayload;
  await sleep(payload.workMs, undefined, { signal: job.signal });
  if (job.attempt === 1 && payload.failFirst === 'retryable') {
    throw new RetryableError('downstream timed out (planned by the demo)', { code: 'DEMO_TIMEOUT' });
  }
  if (job.attempt === 1 && payload.failFirst === 'error') {
    throw new Error('unexpected failure (planned by the demo)');
  }
};
