// Claim throughput of a queue with a rate or concurrency limit that is never reached, as a ratio
// to the same queue unlimited: what the throttled claim statement (its limiter row lock, its
// sliding window and its live-lease count) costs when the limit is not what holds work back.
// The same jobs are claimed and completed by 4 claimers (--claimers) in batches of 100 until the queue is
// empty; workloads rotate over the rounds and medians are reported.
// `npm run bench:ratelimit` (DATABASE_URL, or an embedded server). Options: --jobs N --rounds N
// --claimers N (default 4).
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { Leasehold } from '../dist/index.js';
import { describeEnvironment, formatEnvironment, loadAverage } from './lib/environment.mjs';
import { openServer } from './lib/server.mjs';
import { summarize } from './lib/stats.mjs';

const BATCH = 100;

const WORKLOADS = {
  unlimited: { item: () => ({ payload: {} }) },
  'rate limit 10,000 per ms': {
    configure: (lh, queue) => lh.configureQueue(queue, { rateLimit: { max: 10_000, perMs: 1 } }),
    item: () => ({ payload: {} }),
  },
  'concurrencyLimit 100,000': {
    configure: (lh, queue) => lh.configureQueue(queue, { concurrencyLimit: 100_000 }),
    item: () => ({ payload: {} }),
  },
  'both limits': {
    configure: (lh, queue) =>
      lh.configureQueue(queue, { rateLimit: { max: 10_000, perMs: 1 }, concurrencyLimit: 100_000 }),
    item: () => ({ payload: {} }),
  },
  'per-key rate limit, 200 keys': {
    configure: (lh, queue) =>
      lh.configureQueue(queue, { rateLimit: { max: 10_000, perMs: 1, perKey: true } }),
    item: (i) => ({ payload: {}, concurrencyKey: `tenant-${i % 200}` }),
  },
};

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '3' },
    claimers: { type: 'string', default: '4' },
  },
});
const JOBS = Math.min(200_000, Math.max(1000, Number(values.jobs)));
const ROUNDS = Math.min(10, Math.max(1, Number(values.rounds)));
// Limited claims of one queue take turns at its limiter row: contention is what they cost most.
const CLAIMERS = Math.min(16, Math.max(1, Number(values.claimers)));

async function runOnce(connectionString, name, workload, round) {
  const schema = `bench_ratelimit_${round}_${Object.keys(WORKLOADS).indexOf(name)}`;
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
  const { rows } = await lh.pool.query(
    `SELECT coalesce(sum(throttled_claims), 0)::int AS n FROM "${schema}".rate_limits`,
  );
  await lh.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  await lh.close();
  if (done !== JOBS) throw new Error(`${name}: ${done} of ${JOBS} jobs done`);
  if (rows[0].n !== 0) throw new Error(`${name}: the limit was reached (${rows[0].n} throttled claims)`);
  return JOBS / seconds;
}

const server = await openServer({ settings: {} });
try {
  const admin = new pg.Pool({ connectionString: server.connectionString, max: 1 });
  console.log(formatEnvironment(await describeEnvironment(admin), server));
  await admin.end();
  const rates = Object.fromEntries(Object.keys(WORKLOADS).map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, workload] of Object.entries(WORKLOADS)) {
      rates[name].push(await runOnce(server.connectionString, name, workload, round));
    }
  }
  console.log(
    `claim + complete, ${JOBS} jobs, ${CLAIMERS} claimers, batches of ${BATCH}, median of ${ROUNDS}`,
  );
  const plain = summarize(rates.unlimited).median;
  for (const [name, values] of Object.entries(rates)) {
    const { median } = summarize(values);
    console.log(
      `${name.padEnd(30)} ${median.toFixed(0).padStart(7)} jobs/s   ratio to unlimited ${(median / plain).toFixed(2)}`,
    );
  }
  console.log(`load average at end (1/5/15 min): ${loadAverage()}`);
} finally {
  await server.stop();
}
process.exit(0);
