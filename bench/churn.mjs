// `npm run bench:churn`: a steady churn of short jobs for a while, once normally and once with a
// transaction pinning the xmin horizon for the whole run, reporting throughput per window and the
// size of the jobs table and its indexes.
// Usage: node bench/churn.mjs [minutes per run, default 10]
//        node bench/churn.mjs --jobs N   (one unpinned run until N jobs completed: the long run of
//                                         issue 19, the database's size after 10 min against the end)
import pg from 'pg';
import { Leasehold } from '../dist/index.js';
import { openServer } from './lib/server.mjs';

const LONG = process.argv[2] === '--jobs';
const UNTIL_JOBS = LONG ? Number(process.argv[3]) : 0;
const MINUTES = LONG ? 0 : Number(process.argv[2] ?? 10);
const usage =
  'Usage: npm run bench:churn -- [minutes per run, default 10, at most 120] | --jobs N (1,000 to 1,000,000,000)';
if (
  process.argv[2] === '--help' ||
  (LONG
    ? !Number.isInteger(UNTIL_JOBS) || UNTIL_JOBS < 1000 || UNTIL_JOBS > 1e9
    : !Number.isFinite(MINUTES) || MINUTES <= 0 || MINUTES > 120)
) {
  console.error(usage);
  process.exit(process.argv[2] === '--help' ? 0 : 2);
}
const WINDOW_MS = 10_000;
const BACKLOG = 20_000;
const SCHEMA = 'leasehold_churn';

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const mb = (bytes) => (bytes / 1024 / 1024).toFixed(1);

// jobs and finished_jobs are partitioned into lanes (migration 018): their sizes are the sums over
// their partitions (a partitioned parent has no storage of its own).
async function sizes(pool) {
  const { rows } = await pool.query(
    `WITH lanes AS (SELECT relid FROM pg_partition_tree('${SCHEMA}.jobs') WHERE isleaf),
          finished_lanes AS (SELECT relid FROM pg_partition_tree('${SCHEMA}.finished_jobs') WHERE isleaf)
     SELECT (SELECT sum(pg_relation_size(relid)) FROM lanes) AS heap,
            (SELECT sum(pg_indexes_size(relid)) FROM lanes) AS indexes,
            (SELECT sum(pg_total_relation_size(relid)) FROM finished_lanes) AS finished,
            pg_database_size(current_database()) AS database,
            (SELECT sum(n_dead_tup) FROM pg_stat_user_tables WHERE relid IN (SELECT relid FROM lanes)) AS dead_tuples`,
  );
  return rows[0];
}

async function churn(connectionString, pinned, untilJobs = 0) {
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
  const started = Date.now();
  let last = worker.counters.completed;
  while (untilJobs > 0 ? worker.counters.completed < untilJobs : Date.now() < end) {
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
    const now = worker.counters.completed;
    windows.push(((now - last) * 1000) / WINDOW_MS);
    last = now;
    samples.push(await sizes(pool));
    console.error(
      `${pinned ? 'pinned' : 'normal'} ${windows.length * 10}s: ${windows.at(-1).toFixed(0)} jobs/s, ${worker.counters.completed} done, jobs heap ${mb(samples.at(-1).heap)} MB, indexes ${mb(samples.at(-1).indexes)} MB, finished_jobs ${mb(samples.at(-1).finished)} MB, database ${mb(samples.at(-1).database)} MB, dead tuples ${samples.at(-1).dead_tuples}`,
    );
  }
  const elapsedS = (Date.now() - started) / 1000;
  const completed = worker.counters.completed;
  stopping = true;
  clearInterval(pruner);
  await producer;
  await worker.stop();
  if (pin) await pin.end();
  await lh.close();
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await pool.end();
  return { windows, samples, completed, elapsedS };
}

const server = await openServer({ settings: {} });
const { connectionString } = server;
try {
  if (LONG) await longRun(connectionString);
  else await pairOfRuns(connectionString);
} finally {
  await server.stop();
}

// One unpinned run until UNTIL_JOBS jobs completed: the database's size after ten minutes (sample
// 60, one per 10 s window) against its largest later and at the end.
async function longRun(connectionString) {
  const run = await churn(connectionString, false, UNTIL_JOBS);
  const at10 = run.samples[Math.min(60, run.samples.length - 1)];
  const later = run.samples.slice(60);
  const largest = Math.max(...later.map((x) => Number(x.database)));
  const end = run.samples.at(-1);
  console.log(
    `Long churn: ${run.completed} jobs in ${(run.elapsedS / 60).toFixed(1)} min (median ${median(run.windows).toFixed(0)} jobs/s); backlog kept near ${BACKLOG}; concurrency 16, prefetch 500.\n`,
  );
  console.log(
    '| database MB after 10 min | largest after 10 min | at the end | end / 10 min | largest / 10 min |',
  );
  console.log('| ---: | ---: | ---: | ---: | ---: |');
  console.log(
    `| ${mb(at10.database)} | ${mb(largest)} | ${mb(end.database)} | ${(Number(end.database) / Number(at10.database)).toFixed(2)}× | ${(largest / Number(at10.database)).toFixed(2)}× |`,
  );
}

async function pairOfRuns(connectionString) {
  const normal = await churn(connectionString, false);
  const pinned = await churn(connectionString, true);
  const report = (label, run) => {
    const first = run.windows.slice(0, 3);
    const lastWindows = run.windows.slice(-3);
    const s0 = run.samples[1] ?? run.samples[0];
    const s1 = run.samples.at(-1);
    // "After two minutes": the largest size seen from the twelfth sample on, against the end.
    const settled = run.samples.slice(Math.min(12, run.samples.length - 1));
    const largest = (key) => mb(Math.max(...settled.map((x) => Number(x[key]))));
    return `| ${label} | ${median(run.windows).toFixed(0)} | ${median(first).toFixed(0)} | ${median(lastWindows).toFixed(0)} | ${mb(s0.heap)} → ${mb(s1.heap)} (${largest('heap')}) | ${mb(s0.indexes)} → ${mb(s1.indexes)} (${largest('indexes')}) | ${mb(s0.finished)} → ${mb(s1.finished)} | ${mb(s0.database)} → ${mb(s1.database)} |`;
  };
  console.log(
    `Churn for ${MINUTES} min per run; backlog kept near ${BACKLOG}; concurrency 16, prefetch 500.\n`,
  );
  console.log(
    '| run | median jobs/s | first 30 s | last 30 s | jobs heap MB (10 s → end; largest after 2 min) | jobs indexes MB (same) | finished_jobs MB | database MB |',
  );
  console.log('| --- | ---: | ---: | ---: | --- | --- | --- | --- |');
  console.log(report('normal', normal));
  console.log(report('xmin pinned all run', pinned));
  console.log(
    `\nPinned / normal median throughput: ${(median(pinned.windows) / median(normal.windows)).toFixed(2)}×`,
  );
}
