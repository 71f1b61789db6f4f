// graphile-worker on the processing workload, with its documented batching settings
// (worker.graphile.org/docs/performance#batching): a local queue of 500 jobs fetched at once, and
// completions/failures batched on the next tick. Completed jobs are deleted by graphile-worker, so
// "every job succeeded" is an empty jobs table plus exactly one handler call per job.
import pg from 'pg';
import { installedVersion } from '../../lib/package-version.mjs';

const SCHEMA = 'bench_graphile'; // a constant: the only identifier interpolated into SQL here
const TASK = 'bench_noop';
const LOAD_BATCH = 1000;
const POOL_SIZE = 10; // graphile-worker's own default (maxPoolSize)
const PRESET = { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } };

export let label = 'graphile-worker';

let graphile = null;
async function lib() {
  graphile ??= await import('graphile-worker');
  return graphile;
}

/** Null when usable, else why not. */
export async function available() {
  try {
    await lib();
    label = `graphile-worker ${installedVersion('graphile-worker')}`;
    return null;
  } catch (err) {
    return `graphile-worker is not installed or does not load: ${err.message}`;
  }
}

function silentLogger(gw) {
  return new gw.Logger(() => () => {});
}

export async function setup(ctx) {
  const gw = await lib();
  await ctx.admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await gw.runMigrations({
    connectionString: ctx.connectionString,
    schema: SCHEMA,
    logger: silentLogger(gw),
  });
}

export async function load(ctx, jobs) {
  const gw = await lib();
  await ctx.admin.query(`DELETE FROM ${SCHEMA}._private_jobs`);
  const utils = await gw.makeWorkerUtils({
    connectionString: ctx.connectionString,
    schema: SCHEMA,
    logger: silentLogger(gw),
  });
  try {
    for (let done = 0; done < jobs; done += LOAD_BATCH) {
      const size = Math.min(LOAD_BATCH, jobs - done);
      await utils.addJobs(Array.from({ length: size }, () => ({ identifier: TASK, payload: {} })));
    }
  } finally {
    await utils.release();
  }
  return {};
}

async function remaining(ctx) {
  const { rows } = await ctx.admin.query(`SELECT count(*)::int AS n FROM ${SCHEMA}._private_jobs`);
  return rows[0].n;
}

export async function tableShowsDone(ctx) {
  return (await remaining(ctx)) === 0;
}

export async function verify(ctx) {
  const left = await remaining(ctx);
  if (left !== 0) throw new Error(`graphile-worker: ${left} jobs left in the table (failed or unfinished)`);
}

export async function teardown(ctx) {
  await ctx.admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
}

export async function prepareWorker({ connectionString, concurrency, onHandled, onError }) {
  const gw = await lib();
  // graphile-worker's documented pgPool option: a pool of its default size, connected before the
  // start signal so that the measurement covers work, not connecting (as for the other systems).
  const pgPool = new pg.Pool({ connectionString, max: POOL_SIZE });
  // The error handlers graphile-worker asks a pool of one's own to carry (it warns otherwise).
  pgPool.on('error', onError);
  pgPool.on('connect', (client) => client.on('error', onError));
  const clients = await Promise.all(Array.from({ length: 2 }, () => pgPool.connect()));
  for (const client of clients) client.release();
  let runner = null;
  return {
    async start() {
      runner = await gw.run({
        pgPool,
        schema: SCHEMA,
        concurrency,
        noHandleSignals: true,
        logger: silentLogger(gw),
        taskList: {
          [TASK]: async () => {
            onHandled(1);
          },
        },
        preset: PRESET,
      });
      runner.promise.catch(onError);
    },
    async stop() {
      await runner?.stop();
      await pgPool.end();
      return {};
    },
  };
}

export const settingsNote = `concurrency 16, localQueue.size 500, completeJobBatchDelay 0, failJobBatchDelay 0, pool ${POOL_SIZE}`;
