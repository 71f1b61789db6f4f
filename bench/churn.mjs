// `npm run bench:churn`: a steady churn of short jobs for a while, once normally and once with a
// transaction pinning the xmin horizon for the whole run, reporting throughput per window and the
// size of the jobs table and its indexes. Usage: node bench/churn.mjs [minutes per run, default 10]
import pg from 'pg';
import { Leasehold } from '../dist/index.js';
import { openServer } from './lib/server.mjs';

const MINUTES = Number(process.argv[2] ?? 10);
if (!Number.isFinite(MINUTES) || MINUTES <= 0 || MINUTES > 120) {
  console.error('Usage: npm run bench:churn -- [minutes per run, default 10, at most 120]');
  process.exit(process.argv[2] === '--help' ? 0 : 2);
}
const WINDOW_MS = 10_000;
const BACKLOG = 20_000;
const SCHEMA = 'leasehold_churn';

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const mb = (bytes) => (bytes / 1024 / 1024).toFixed(1);

async function sizes(pool) {
  const { rows } = await pool.query(
    `SELECT pg_relation_size('${SCHEMA}.jobs') AS heap,
            pg_indexes_size('${SCHEMA}.jobs') AS indexes,
            pg_total_relation_size('${SCHEMA}.finished_jobs') AS finished,
            (SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = '${SCHEMA}' AND relname = 'jobs') AS dead_tuples`,
  );
  return rows[0];
}

async function churn(connectionString, pinned) {
  const pool = new pg.Pool({ connectionString, max: 3 });
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  const lh = new Leasehold({ connectionString, schema: SCHEMA, poolSize: 8 });
  await lh.migrate();
  let pin = null;
  if (pinned) {
    // A snapshot held open for the whole run: vacuum can remove nothing newer than its xmin.
    pin = new pg.Client({ connectionString });
    await pin.connect();
    await pin.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await pin.query('SELECT count(*) FROM pg_class');
  }
  const worker = lh.worker({
    queues: { churn: { concurrency: 16, prefetch: 500, handler: async () => {} } },
    claimBatchSize: 500,
  });
  let stopping = false;
  // The backlog is counted in this process (enqueued minus completed), not with a count(*) of
  // pending rows: under a pinned horizon that count walks every dead index entry too, every 50 ms,
  // and would measure the bench's own query rather than the queue.
  let enqueued = 0;
  const producer = (async () => {
    while (!stopping) {
      if (enqueued - worker.counters.completed < BACKLOG) {
        await lh.enqueueMany(
          'churn',
          Array.from({ length: 5000 }, (_, i) => ({ payload: { i } })),
        );
        enqueued += 5000;
      } else {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  })();
  // Finished records older than a few seconds are pruned as the retention service would.
  const pruner = setInterval(() => {
    pool
      .query(`DELETE FROM ${SCHEMA}.finished_jobs WHERE finished_at < now() - interval '5 seconds'`)
      .catch(() => {});
  }, 2000);
  await worker.start();
  const windows = [];
  const samples = [await sizes(pool)];
  const end = Date.now() + MINUTES * 60_000;
  let last = worker.counters.completed;
  while (Date.now() < end) {
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
    const now = worker.counters.completed;
    windows.push(((now - last) * 1000) / WINDOW_MS);
    last = now;
    samples.push(await sizes(pool));
    console.error(
      `${pinned ? 'pinned' : 'normal'} ${windows.length * 10}s: ${windows.at(-1).toFixed(0)} jobs/s, jobs heap ${mb(samples.at(-1).heap)} MB, indexes ${mb(samples.at(-1).indexes)} MB, dead tuples ${samples.at(-1).dead_tuples}`,
    );
  }
  stopping = true;
  clearInterval(pruner);
  await producer;
  await worker.stop();
  if (pin) await pin.end();
  await lh.close();
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await pool.end();
  return { windows, samples };
}

const server = await openServer({ settings: {} });
const { connectionString } = server;
try {
  const normal = await churn(connectionString, false);
  const pinned = await churn(connectionString, true);
  const report = (label, run) => {
    const first = run.windows.slice(0, 3);
    const lastWindows = run.windows.slice(-3);
    const s0 = run.samples[1] ?? run.samples[0];
    const s1 = run.samples.at(-1);
    return `| ${label} | ${median(run.windows).toFixed(0)} | ${median(first).toFixed(0)} | ${median(lastWindows).toFixed(0)} | ${mb(s0.heap)} → ${mb(s1.heap)} | ${mb(s0.indexes)} → ${mb(s1.indexes)} | ${mb(Math.max(...run.samples.map((x) => Number(x.heap))))} |`;
  };
  console.log(
    `Churn for ${MINUTES} min per run; backlog kept near ${BACKLOG}; concurrency 16, prefetch 500.\n`,
  );
  console.log(
    '| run | median jobs/s | first 30 s | last 30 s | jobs heap MB (start → end) | jobs indexes MB | largest heap MB |',
  );
  console.log('| --- | ---: | ---: | ---: | --- | --- | ---: |');
  console.log(report('normal', normal));
  console.log(report('xmin pinned all run', pinned));
  console.log(
    `\nPinned / normal median throughput: ${(median(pinned.windows) / median(normal.windows)).toFixed(2)}×`,
  );
} finally {
  await server.stop();
}
