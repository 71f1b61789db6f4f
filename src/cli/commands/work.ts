import { Command } from 'commander';
import { closeContext, type LeaseholdContext, resolveContext } from '../../context/context.js';
import { migrate } from '../../migrations/migrator.js';
import { WORKER_DEFAULTS } from '../../runtime/options.js';
import { Worker } from '../../runtime/worker.js';
import {
  addConnectionOptions,
  type ConnectionFlags,
  chosenDatabase,
  databaseUrlOf,
  withDatabase,
  withOfflineContext,
} from '../connection.js';
import { explainDatabaseError } from '../database-errors.js';
import { CliError } from '../errors.js';
import type { Interrupt } from '../interrupt.js';
import { note } from '../log.js';
import { formatCounters, logWorkerActivity, tallyHandedBack } from '../worker-log.js';
import { loadWorkerModule, type WorkerModule } from '../worker-module.js';

// Beyond the worker's own shutdown timeout, how long stop() may take to hand back leases and
// write the last outcomes. It waits on the database, which may be gone; the process must still end.
const STOP_GRACE_MS = 10_000;

/**
 * Runs a worker module until a signal: validates it, migrates, starts the worker and, at SIGTERM,
 * SIGINT or SIGHUP, stops it gracefully. Resolves once the worker has stopped.
 */
export async function runWorker(
  module: WorkerModule,
  connectionString: string,
  schema: string,
  interrupt: Interrupt,
): Promise<void> {
  const context = resolveContext({ connectionString, schema });
  try {
    await runWorkerOn(context, module, interrupt);
  } finally {
    await closeContext(context);
  }
}

/** `runWorker` on a context already resolved (the worker is built from it, never from a client). */
export async function runWorkerOn(
  context: LeaseholdContext,
  module: WorkerModule,
  interrupt: Interrupt,
): Promise<void> {
  const schema = context.schema;
  const worker = new Worker(context, workerOptions(module, true));
  const migrated = await migrate(context.pool, schema);
  note(`schema ${schema} at version ${migrated.version}`);
  for (const notice of migrated.notices) note(notice);
  if (interrupt.received) return;
  await worker.start();
  note(`worker ${worker.owner} started on ${worker.queues.join(', ')}; stop it with SIGTERM or Ctrl-C`);
  const stopLogging = logWorkerActivity(worker);
  const shutdown = tallyHandedBack(worker);
  try {
    const signal = await interrupt.wait();
    note(`${signal}: stopping; running jobs get up to ${shutdownTimeoutMs(module)} ms to finish`);
    await stopWithin(worker, shutdownTimeoutMs(module) + STOP_GRACE_MS);
  } finally {
    stopLogging();
  }
  note(`stopped: ${formatCounters(worker.counters, shutdown.running(), shutdown.handedBack())}`);
}

// The worker a module asks for: its queues by name and its tasks, with its worker options.
function workerOptions(module: WorkerModule, handleSignals: boolean) {
  return { ...module.options, queues: module.queues, tasks: module.tasks, handleSignals };
}

/** `leasehold work <module>`: runs the tasks and handlers a module exports. */
export function workCommand(interrupt: Interrupt): Command {
  const command = new Command('work')
    .description('run the tasks and queue handlers a JavaScript module exports, until SIGTERM or SIGINT')
    .argument(
      '<module>',
      'path of an ES module (relative to the current folder) exporting tasks or handlers',
    );
  addConnectionOptions(command);
  command.addHelpText(
    'after',
    `
The module exports tasks made by defineTask (alone or in arrays; each runs on the queue of its
name, as lh.worker({ tasks }) runs it), or one handler per queue (the export's name), or
{ handler, concurrency, leaseMs, ... }, or both; it may export worker options (pollIntervalMs,
shutdownTimeoutMs, ...) as default or as \`options\`:

  // tasks.mjs: typed tasks
  import { defineTask } from 'leasehold';
  export const welcome = defineTask('welcome', { handler: async (job) => greet(job.payload) });
  export const all = [defineTask('resize', { handler: async (job) => resize(job.payload), concurrency: 4 })];

  // jobs.mjs: plain handlers
  export const emails = async (job) => { await send(job.payload); };
  export const thumbnails = { handler: async (job) => resize(job.payload), concurrency: 4 };
  export const options = { pollIntervalMs: 500 };

Examples:
  $ DATABASE_URL=postgres://app:secret@localhost:5432/app leasehold work ./tasks.mjs
  $ DATABASE_URL=postgres://app:secret@localhost:5432/app leasehold work ./jobs.mjs`,
  );
  command.action(async (path: string, flags: ConnectionFlags) => {
    const schema = flags.schema ?? 'leasehold';
    const module = await loadWorkerModule(path);
    // Validates every option (with suggestions for typos) before a database is involved.
    await withOfflineContext(schema, (context) => new Worker(context, workerOptions(module, false)));
    await withDatabase(databaseUrlOf(chosenDatabase(flags)), interrupt, (connectionString) =>
      runWorker(module, connectionString, schema, interrupt),
    ).catch((err: unknown) => {
      throw explainDatabaseError(err, schema);
    });
  });
  return command;
}

function shutdownTimeoutMs(module: WorkerModule): number {
  return module.options.shutdownTimeoutMs ?? WORKER_DEFAULTS.shutdownTimeoutMs;
}

async function stopWithin(worker: Worker, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<true>((resolve) => {
    timer = setTimeout(() => resolve(true), timeoutMs);
  });
  const result = await Promise.race([worker.stop().then(() => false), timedOut]);
  clearTimeout(timer);
  if (result) {
    throw new CliError(
      `the worker did not stop within ${timeoutMs} ms (is the database reachable?); its leases will expire and be recovered`,
    );
  }
}
