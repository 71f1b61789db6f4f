// Claim throughput with ordering keys and with per-key concurrency limits, as ratios to plain
// claims: the same jobs claimed and completed by 4 claimers in batches of 100, until the queue is
// empty. Ordering keys: 2,000 keys (at most 2,000 heads claimable at once). Per-key limits: 200
// keys, at most 5 running per key. Workloads rotate over the rounds; medians are reported.
import { performance } from 'node:perf_hooks';
import { Leasehold } from '../../dist/index.js';
import { summarize } from '../lib/stats.mjs';

const CLAIMERS = 4;
const BATCH = 100;

const WORKLOADS = {
  plain: { item: () => ({ payload: {} }) },
  'ordering keys': { item: (i) => ({ payload: {}, orderingKey: `order-${i % 2000}` }) },
  'per-key limit': {
    configure: (lh, queue) => lh.configureQueue(queue, { concurrencyLimitPerKey: 5 }),
    item: (i) => ({ payload: {}, concurrencyKey: `tenant-${i % 200}` }),
  },
};

async function runOnce(connectionString, name, workload, round, JOBS) {
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

/** Measures plain, ordering-key and per-key-limit claims; returns a jobs/s summary of each. */
export function measureOrdering(connectionString, options = {}) {
  return measureWorkloads(connectionString, WORKLOADS, options);
}

/**
 * Claims and completes each workload's jobs (`{ configure?, item }` by name) the same way, rounds
 * rotating over them; returns a jobs/s summary of each (bench/workloads/fairness.mjs reuses it).
 */
export async function measureWorkloads(connectionString, workloads, { jobs = 20_000, rounds = 3 } = {}) {
  const rates = Object.fromEntries(Object.keys(workloads).map((name) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const [name, workload] of Object.entries(workloads)) {
      rates[name].push(await runOnce(connectionString, name, workload, round, jobs));
    }
  }
  return Object.fromEntries(Object.entries(rates).map(([name, values]) => [name, summarize(values)]));
}
