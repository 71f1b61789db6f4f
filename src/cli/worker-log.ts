import type { Worker, WorkerCounters } from '../index.js';
import { describeError } from './errors.js';
import { note } from './log.js';

const INTERVAL_MS = 1000;

/** One line of a worker's counters (never anything from a job's payload). */
export function formatCounters(counters: WorkerCounters, running: number, handedBack?: number): string {
  const parts = Object.entries(counters).map(([name, value]) => `${name}=${value}`);
  if (handedBack !== undefined) parts.push(`handedBack=${handedBack}`);
  return `${parts.join(' ')} running=${running}`;
}

/**
 * Counts the runs a worker hands back at shutdown (aborted, pending again at once, attempt
 * refunded): the stop summary reports them as handed back, and no longer as running, although a
 * handler that ignores its signal may still be returning. Returns the live tally.
 */
export function tallyHandedBack(worker: Worker): { handedBack(): number; running(): number } {
  const runs = new Set<{ readonly settled: boolean }>();
  worker.on('aborted', (job, reason) => {
    if (reason === 'shutdown') runs.add(job);
  });
  return {
    handedBack: () => runs.size,
    running: () => worker.activeCount - [...runs].filter((job) => !job.settled).length,
  };
}

/**
 * Logs a worker's counters to stderr at most once a second, and only when they changed, so an
 * idle worker stays quiet; internal errors (the worker retries by itself) are logged at the same
 * pace, repeats counted rather than printed. Returns a function that stops logging.
 */
export function logWorkerActivity(worker: Worker): () => void {
  let lastLine = formatCounters(worker.counters, worker.activeCount);
  let lastError: string | null = null;
  let suppressed = 0;
  const onError = (err: unknown) => {
    if (lastError === null) lastError = describeError(err);
    else suppressed++;
  };
  worker.on('error', onError);
  const timer = setInterval(() => {
    if (lastError !== null) {
      note(`worker error: ${lastError}${suppressed > 0 ? ` (and ${suppressed} more)` : ''}`);
      lastError = null;
      suppressed = 0;
    }
    const line = formatCounters(worker.counters, worker.activeCount);
    if (line !== lastLine) note(line);
    lastLine = line;
  }, INTERVAL_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    worker.off('error', onError);
  };
}
