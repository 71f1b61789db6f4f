// Claim throughput with ordering keys and with per-key concurrency limits, as ratios to plain
// claims. Standalone: `npm run build && node bench/ordering.mjs` (DATABASE_URL, or an embedded server).
//
// Each workload enqueues the same number of jobs, then 4 claimers claim batches of 100 and complete
// them with completeMany until the queue is empty; the figure is jobs claimed and completed per
// second. Workloads run in rotation, several rounds, and the median is reported, since the machine
// is shared. Ordering keys: 2,000 keys of 10 jobs (at most 2,000 heads claimable at once). Per-key
// limits: 200 keys, at most 5 running per key.
import { performance } from 'node:perf_hooks';
import { Leasehold, startEmbeddedPostgres } from '../dist/index.js';

const JOBS = 20_000;
const CLAIMERS = 4;
const BATCH = 100;
const ROUNDS = 3;

const WORKLOADS = {
  plain: { item: () => ({ payload: {} }) },
  'ordering keys': { item: (i) => ({ payload: {}, orderingKey: `order-${i % 2000}` }) },
  'per-key limit': {
    configure: (lh, queue) => lh.configureQueue(queue, { concurrencyLimitPerKey: 5 }),
    item: (i) => ({ payload: {}, concurrencyKey: `tenant-${i % 200}` }),
  },
};

async function runOnce(connectionString, name, workload, round) {
  const schema = `bench_ordering_${round}_${name.replace(/\W/g, '_')}`;
  const lh = new Leasehold({ connectionString, schema, poolSize: CLAIMERS + 2 });
  await lh.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await lh.migrate();
  const queue = 'bench';
  await workload.configure?.(lh, queue);
  for (let start = 0; start < JOBS; start += 1000) {
    await lh.enqueueMany(
      queue,
      Array.from({ length: 1000 }, (_, j) => workload.item(start + j)),
    );
  }
  await lh.pool.query(`VACUUM ANALYZE "${schema}".jobs`);
  let done = 0;
  const claimer = async (n) => {
    let empty = 0;
    while (done < JOBS && empty < 200) {
      const leases = await lh.claim({ queue, owner: `c${n}`, limit: BATCH });
      if (leases.length === 0) {
        empty++;
        await new Promise((resolve) => setTimeout(resolve, 1));
        continue;
      }
      empty = 0;
      await lh.completeMany(leases);
      done += leases.length;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CLAIMERS }, (_, n) => claimer(n)));
  const seconds = (performance.now() - started) / 1000;
  await lh.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  await lh.close();
  if (done !== JOBS) throw new Error(`${name}: ${done} of ${JOBS} jobs done`);
  return JOBS / seconds;
}

const external = process.env.DATABASE_URL;
const server = external ? null : await startEmbeddedPostgres();
const connectionString = external ?? server.connectionString;
try {
  const rates = Object.fromEntries(Object.keys(WORKLOADS).map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, workload] of Object.entries(WORKLOADS)) {
      rates[name].push(await runOnce(connectionString, name, workload, round));
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const plain = median(rates.plain);
  console.log(
    `claim + complete, ${JOBS} jobs, ${CLAIMERS} claimers, batches of ${BATCH}, median of ${ROUNDS}`,
  );
  for (const [name, values] of Object.entries(rates)) {
    const rate = median(values);
    console.log(
      `${name.padEnd(14)} ${rate.toFixed(0).padStart(7)} jobs/s   ratio to plain ${(rate / plain).toFixed(2)}`,
    );
  }
} finally {
  await server?.stop();
}
