import { Leasehold } from '../index.js';
import { dropDemoSchema, newDemoSchema } from './demo-schema.js';
import { DemoWorker } from './demo-worker.js';
import { type Progress, readProgress, tallyJobs } from './job-tally.js';
import type { ProgressDisplay } from './progress.js';
import { buildReport, type DemoReport } from './report.js';
import { RunLedger } from './run-ledger.js';
import { DEMO_QUEUES, DEMO_SETTINGS } from './settings.js';
import { waitUntil } from './wait.js';
import { demoJobs } from './workload.js';

/** Options of `runDemo`. */
export interface DemoOptions {
  /** The server to run on; the demo works in a fresh schema of its own and drops it at the end. */
  connectionString: string;
  /** Jobs to enqueue (default 3000). */
  jobs?: number;
  /** Aborted by the caller's deadline or an interruption: the demo then cleans up and throws. */
  signal: AbortSignal;
  /** Where progress and events go. */
  display: ProgressDisplay;
}

const POLL_INTERVAL_MS = 200;
// How long to wait for a worker to be running handlers before signalling it anyway (a tiny run
// may have finished everything already).
const BUSY_PATIENCE_MS = 5000;
// Beyond the workers' shutdown timeout, for handing leases back and closing their pools.
const STOP_GRACE_MS = 5000;

/**
 * Runs the demo: enqueues jobs over several queues, runs three worker processes, kills one with
 * SIGKILL and pauses another past its lease, waits until every job is finished, and reports what
 * the database and the workers saw. Child processes and the schema are removed whatever happens.
 */
export async function runDemo(options: DemoOptions): Promise<DemoReport> {
  const { connectionString, signal, display } = options;
  const total = options.jobs ?? DEMO_SETTINGS.jobs;
  const schema = newDemoSchema();
  const lh = new Leasehold({ connectionString, schema, poolSize: 8 });
  const ledger = new RunLedger();
  const workers: DemoWorker[] = [];
  let progress: Progress = { finished: 0, pending: total, running: 0 };

  // Reads progress, shows it, and ends any wait at once if a worker process failed.
  const waitFor = (what: string, condition: () => boolean) =>
    waitUntil(
      async () => {
        for (const worker of workers) worker.throwIfFailed();
        progress = await readProgress(lh, DEMO_QUEUES, total);
        display.update(progress.finished);
        return condition();
      },
      { signal, what, intervalMs: POLL_INTERVAL_MS },
    );

  try {
    await lh.migrate();
    const idsByQueue = new Map<string, string[]>();
    for (const [queue, items] of demoJobs(total)) {
      idsByQueue.set(queue, (await lh.enqueueMany(queue, items)).ids);
    }
    display.event(`enqueued ${total} jobs over ${DEMO_QUEUES.join(', ')} in schema ${schema}`);
    for (const number of [1, 2, 3]) {
      workers.push(new DemoWorker(number, (worker, ids) => ledger.record(worker, ids)));
    }
    await Promise.all(
      workers.map((worker) => worker.start({ number: worker.number, connectionString, schema }, signal)),
    );
    const [first, second, third] = workers as [DemoWorker, DemoWorker, DemoWorker];
    display.event(
      `started 3 worker processes: ${DEMO_SETTINGS.leaseMs} ms leases, renewed while handlers run`,
    );
    const startedAt = performance.now();
    await waitFor(`${DEMO_SETTINGS.killAt * 100}% of the jobs to finish`, () => {
      return progress.finished >= total * DEMO_SETTINGS.killAt;
    });
    // Signalled at a moment its handlers are running, so that it surely leaves work behind.
    await second.whenBusy(signal, BUSY_PATIENCE_MS);
    second.kill();
    display.event(`killed worker 2 (SIGKILL) with ${second.active} jobs in hand: their leases will expire`);

    await waitFor(`${DEMO_SETTINGS.pauseAt * 100}% of the jobs to finish`, () => {
      return progress.finished >= total * DEMO_SETTINGS.pauseAt;
    });
    await third.whenBusy(signal, BUSY_PATIENCE_MS);
    third.pause();
    display.event(
      `paused worker 3 (SIGSTOP) with ${third.active} jobs in hand, for ${DEMO_SETTINGS.pauseMs} ms: longer than its lease`,
    );
    const pausedAt = performance.now();
    await waitFor('the pause to end', () => performance.now() - pausedAt >= DEMO_SETTINGS.pauseMs);
    third.resume();
    display.event(
      'resumed worker 3 (SIGCONT): its leases expired meanwhile, so none of its late outcomes may land (the report counts them: fenced or dropped)',
    );

    await waitFor('every job to finish', () => progress.finished >= total);
    const elapsedMs = performance.now() - startedAt;
    display.event('every job finished; stopping workers 1 and 3 gracefully');
    const stopTimeoutMs = DEMO_SETTINGS.shutdownTimeoutMs + STOP_GRACE_MS;
    await Promise.all([first.stop(signal, stopTimeoutMs), third.stop(signal, stopTimeoutMs)]);
    display.stop();

    // Read after the workers stopped, so every write they sent has been answered.
    return buildReport({
      schema,
      jobs: total,
      queues: await tallyJobs(lh, idsByQueue),
      refusals: await lh.leaseRefusals(),
      duplicates: ledger.duplicates([2, 3]),
      elapsedMs,
      workers: workers.map((worker) => ({
        number: worker.number,
        fate: worker.fate,
        pausedForMs: worker.pausedForMs,
        counters: worker.counters,
        runs: ledger.runsBy(worker.number),
        failure: worker.failure,
      })),
    });
  } catch (err) {
    // A failed demo says where the jobs stood, which usually says why.
    if (err instanceof Error) {
      err.message += ` [jobs: ${progress.finished}/${total} finished, ${progress.pending} pending, ${progress.running} running]`;
    }
    throw err;
  } finally {
    display.stop();
    for (const worker of workers) worker.forceKill();
    await dropDemoSchema(lh.pool, schema).catch((err: unknown) => {
      display.event(`could not drop schema ${schema}: ${err instanceof Error ? err.message : String(err)}`);
    });
    await lh.close();
  }
}
