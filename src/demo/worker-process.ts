/**
 * One demo worker, run as a child process of the orchestrator (src/demo/run-demo.ts): its own
 * Leasehold client and worker, the demo's queues, and IPC to report counters and the jobs whose
 * handler succeeded (so the orchestrator can count duplicate runs). It is killed and paused from
 * outside, so it keeps no state that matters beyond what it has already reported.
 */
import { type JobContext, Leasehold, type Worker } from '../index.js';
import type { DemoWorkerConfig, FromWorkerMessage, ToWorkerMessage } from './messages.js';
import { DEMO_QUEUES, DEMO_SETTINGS } from './settings.js';
import { demoHandler } from './workload.js';

let lh: Leasehold | null = null;
let worker: Worker | null = null;
let statusTimer: NodeJS.Timeout | null = null;
let ran: string[] = [];
let handling = 0;
let exiting = false;

const ORPHAN_EXIT_MS = 15_000;

function send(message: FromWorkerMessage, then?: () => void): void {
  if (!process.connected) {
    then?.();
    return;
  }
  process.send?.(message, undefined, undefined, () => then?.());
}

function takeRuns(): string[] {
  const taken = ran;
  ran = [];
  return taken;
}

async function start(config: DemoWorkerConfig): Promise<void> {
  lh = new Leasehold({
    connectionString: config.connectionString,
    schema: config.schema,
    poolSize: 6,
    backoff: DEMO_SETTINGS.backoff,
  });
  const handler = async (job: JobContext) => {
    handling++;
    try {
      await demoHandler(job);
      ran.push(job.id);
    } finally {
      handling--;
    }
  };
  const queue = {
    handler,
    concurrency: DEMO_SETTINGS.concurrency,
    leaseMs: DEMO_SETTINGS.leaseMs,
    renew: 'alive' as const,
  };
  worker = lh.worker({
    owner: `demo-worker-${config.number}:${process.pid}`,
    queues: Object.fromEntries(DEMO_QUEUES.map((name) => [name, queue])),
    pollIntervalMs: DEMO_SETTINGS.pollIntervalMs,
    recoveryIntervalMs: DEMO_SETTINGS.recoveryIntervalMs,
    outcomeBatchDelayMs: DEMO_SETTINGS.outcomeBatchDelayMs,
    shutdownTimeoutMs: DEMO_SETTINGS.shutdownTimeoutMs,
  });
  // Internal errors are retried by the worker itself; the demo judges by the database at the end.
  worker.on('error', () => {});
  await worker.start();
  const running = worker;
  statusTimer = setInterval(() => {
    send({
      type: 'status',
      counters: { ...running.counters },
      active: running.activeCount,
      handling,
      ran: takeRuns(),
    });
  }, DEMO_SETTINGS.statusIntervalMs);
  send({ type: 'ready', owner: running.owner });
}

async function stop(): Promise<void> {
  if (exiting) return;
  exiting = true;
  if (statusTimer) clearInterval(statusTimer);
  await worker?.stop();
  await lh?.close();
  const counters = worker ? { ...worker.counters } : null;
  if (counters) send({ type: 'stopped', counters, ran: takeRuns() }, () => process.exit(0));
  else process.exit(0);
}

function fail(err: unknown): void {
  const message = err instanceof Error ? err.message : String(err);
  send({ type: 'failed', message }, () => process.exit(1));
}

process.on('message', (message: ToWorkerMessage) => {
  if (message.type === 'start') start(message.config).catch(fail);
  else if (message.type === 'stop') stop().catch(fail);
});
// The orchestrator is gone (it crashed or was killed): nobody will stop this worker, so stop now,
// and leave anyway if stopping hangs (the database may be gone too).
process.on('disconnect', () => {
  setTimeout(() => process.exit(1), ORPHAN_EXIT_MS).unref();
  stop().catch(() => process.exit(1));
});
