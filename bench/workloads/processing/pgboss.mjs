// pg-boss on the processing workload, with its throughput settings: batched fetches (a handler
// receives a batch and the whole batch completes in one statement), several fetch loops per
// process, and burst mode (fetch again at once while batches come back full). Completed jobs stay
// in pg-boss's job table in state 'completed'. Each repetition uses a queue of its own.
import { randomBytes } from 'node:crypto';
import { installedVersion } from '../../lib/package-version.mjs';

const SCHEMA = 'bench_pgboss'; // a constant: the only identifier interpolated into SQL here
const LOAD_BATCH = 1000;
const BOSS_OPTIONS = { schema: SCHEMA, supervise: false, schedule: false };
/** Per process. localConcurrency fetch loops, each fetching up to batchSize jobs. */
export const WORK_OPTIONS = {
  batchSize: 500,
  localConcurrency: 2,
  pollingIntervalSeconds: 0.5,
  burstWhenBatchFull: true,
};

export let label = 'pg-boss';

let pgboss = null;
async function lib() {
  pgboss ??= await import('pg-boss');
  return pgboss;
}

async function openBoss(connectionString, extra = {}) {
  const { PgBoss } = await lib();
  const boss = new PgBoss({ connectionString, ...BOSS_OPTIONS, ...extra });
  boss.on('error', () => {}); // reported through the worker's onError where it matters
  await boss.start();
  return boss;
}

export async function available() {
  try {
    await lib();
    label = `pg-boss ${installedVersion('pg-boss')}`;
    return null;
  } catch (err) {
    return `pg-boss is not installed or does not load: ${err.message}`;
  }
}

export async function setup(ctx) {
  await ctx.admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  const boss = await openBoss(ctx.connectionString);
  await boss.stop({ graceful: false });
}

export async function load(ctx, jobs, rep) {
  const queue = `bench_${rep}_${randomBytes(3).toString('hex')}`;
  const boss = await openBoss(ctx.connectionString, { migrate: false });
  try {
    await boss.createQueue(queue);
    for (let done = 0; done < jobs; done += LOAD_BATCH) {
      const size = Math.min(LOAD_BATCH, jobs - done);
      await boss.insert(
        queue,
        Array.from({ length: size }, () => ({ data: {} })),
      );
    }
  } finally {
    await boss.stop({ graceful: false });
  }
  return { queue };
}

async function counts(ctx, queue) {
  const { rows } = await ctx.admin.query(
    `SELECT count(*) FILTER (WHERE state = 'completed')::int AS completed,
            count(*)::int AS total,
            count(*) FILTER (WHERE retry_count <> 0)::int AS retried
     FROM ${SCHEMA}.job WHERE name = $1`,
    [queue],
  );
  return rows[0];
}

export async function tableShowsDone(ctx, run, jobs) {
  return (await counts(ctx, run.queue)).completed === jobs;
}

export async function verify(ctx, run, jobs) {
  const c = await counts(ctx, run.queue);
  if (c.completed !== jobs || c.total !== jobs || c.retried !== 0) {
    throw new Error(`pg-boss: expected ${jobs} jobs completed once each, table shows ${JSON.stringify(c)}`);
  }
}

export async function teardown(ctx) {
  await ctx.admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
}

export async function prepareWorker({ connectionString, run, onHandled, onError }) {
  const boss = await openBoss(connectionString, { migrate: false });
  boss.on('error', onError);
  return {
    async start() {
      await boss.work(run.queue, WORK_OPTIONS, async (jobs) => {
        onHandled(jobs.length);
      });
    },
    async stop() {
      await boss.stop({ graceful: true, timeout: 10_000 });
      return {};
    },
  };
}

export const settingsNote = `batchSize ${WORK_OPTIONS.batchSize}, localConcurrency ${WORK_OPTIONS.localConcurrency}, pollingIntervalSeconds ${WORK_OPTIONS.pollingIntervalSeconds}, burstWhenBatchFull`;
