// Workload 3: drain pre-enqueued no-op jobs with N worker processes, each its own client.
// Timed from the start signal until the table shows every job succeeded; then every job must have
// run exactly once (handler calls across processes, and the table), or the bench fails.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { deadline, sleep, withTimeout } from '../lib/limits.mjs';
import { loadSystem } from './processing/systems.mjs';

const WORKER_SCRIPT = fileURLToPath(new URL('./processing/worker-process.mjs', import.meta.url));
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
const TABLE_POLL_MS = 5;

/** Children alive now, so a failing bench can end them (only these, by their handles). */
export const liveChildren = new Set();

/** Freezes the table statistics and dirty pages left by loading, so each run starts alike. */
async function settleDatabase(admin) {
  await admin.query('VACUUM (ANALYZE)');
  // CHECKPOINT needs superuser or pg_checkpoint; without it runs are only a little noisier.
  await admin.query('CHECKPOINT').catch(() => {});
}

/** One measured run; returns { seconds, jobsPerSec }. */
export async function measureProcessing({ systemKey, processes, jobs, ctx, options, rep }) {
  const system = await loadSystem(systemKey);
  const what = `${system.label}, ${processes} process(es), run ${rep + 1}`;
  const run = await withTimeout(system.load(ctx, jobs, rep), options.timeoutMs, `${what}: loading jobs`);
  await settleDatabase(ctx.admin);

  const config = {
    connectionString: ctx.connectionString,
    concurrency: options.concurrency,
    rawClaimBatch: options.rawClaimBatch,
    leaseholdPrefetch: options.prefetch,
    leaseholdClaimBatchSize: options.claimBatchSize,
    jobMs: options.jobMs ?? 0,
    run,
    timeoutMs: options.timeoutMs,
  };
  const children = Array.from({ length: processes }, () => startChild(systemKey, config));
  try {
    await withTimeout(
      Promise.all(children.map((c) => c.ready)),
      READY_TIMEOUT_MS,
      `${what}: workers starting`,
    );
    const startedAt = performance.now();
    for (const child of children) child.process.send({ type: 'start' });
    await waitUntilDone(children, system, ctx, run, jobs, options.timeoutMs, what);
    const seconds = (performance.now() - startedAt) / 1000;

    const results = await withTimeout(
      Promise.all(children.map((c) => c.stop())),
      STOP_TIMEOUT_MS,
      `${what}: workers stopping`,
    );
    const handled = results.reduce((sum, r) => sum + r.handled, 0);
    if (handled !== jobs) {
      throw new Error(`${what}: handlers ran ${handled} times for ${jobs} jobs (each must run exactly once)`);
    }
    await system.verify(ctx, run, jobs);
    const errorCount = results.reduce((sum, r) => sum + r.errorCount, 0);
    return { seconds, jobsPerSec: jobs / seconds, errorCount, errors: results.flatMap((r) => r.errors) };
  } finally {
    for (const child of children) child.kill();
  }
}

async function waitUntilDone(children, system, ctx, run, jobs, timeoutMs, what) {
  const limit = deadline(timeoutMs, what);
  const stalled = () =>
    new Error(
      `${what} did not finish within ${timeoutMs / 1000} s; handler calls per process: ` +
        children
          .map((c) => `${c.handled} (${c.errorCount} errors${c.errors[0] ? `, first: ${c.errors[0]}` : ''})`)
          .join(', '),
    );
  // Cheap first: the children's handler counts. Only then ask the table, which for systems that
  // batch their completions may lag the handlers by a few milliseconds.
  while (children.reduce((sum, c) => sum + c.handled, 0) < jobs) {
    if (limit.passed) throw stalled();
    const failed = children.find((c) => c.failure);
    if (failed) throw new Error(`${what}: worker failed: ${failed.failure}`);
    await sleep(TABLE_POLL_MS);
  }
  while (
    !(await withTimeout(system.tableShowsDone(ctx, run, jobs), timeoutMs, `${what}: reading the table`))
  ) {
    if (limit.passed) {
      // Every handler ran but the table disagrees: verify() throws with what the table shows.
      await system.verify(ctx, run, jobs);
      throw stalled();
    }
    await sleep(TABLE_POLL_MS);
  }
}

function startChild(systemKey, config) {
  const child = fork(WORKER_SCRIPT, [systemKey], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  liveChildren.add(child);
  const state = { process: child, handled: 0, errorCount: 0, errors: [], failure: null };
  let onStopped;
  const stopped = new Promise((resolve) => {
    onStopped = resolve;
  });
  state.ready = new Promise((resolve, reject) => {
    child.on('message', (message) => {
      if (message.type === 'ready') resolve();
      else if (message.type === 'handled') {
        state.handled = message.handled;
        state.errorCount = message.errorCount;
        state.errors = message.errors;
      } else if (message.type === 'stopped') onStopped(message);
      else if (message.type === 'failed') {
        state.failure = message.message;
        reject(new Error(`worker process failed: ${message.message}`));
      }
    });
    child.on('exit', (code) => {
      liveChildren.delete(child);
      if (code !== 0 && !state.failure) state.failure = `exited with code ${code}`;
      reject(new Error(`worker process exited early (code ${code})`));
    });
  });
  state.ready.catch(() => {}); // observed through Promise.all above
  state.stop = () => {
    child.send({ type: 'stop' });
    return stopped;
  };
  state.kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    liveChildren.delete(child);
  };
  child.send({ type: 'config', config });
  return state;
}
