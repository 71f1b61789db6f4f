// `npm run bench:batch`: a batch handler of no-op jobs against a single-job handler of the same
// no-op, in one run on one server (issue 34). Variants, interleaved rep by rep:
//   single       a no-op handler per job, concurrency --size (the batched completion only);
//   single-base  the same on a build of an earlier commit (`--base DIST`, optional): plain path unchanged?
//   batch        `batch: { size: --size }`, a no-op handler per batch (its completions in one statement);
//   single-call  a handler that makes one call per job (a round trip to the server: `SELECT 1`);
//   batch-call   the same call once per batch: what a batch handler is for (one API call, one INSERT).
// Flags: --jobs N (default 20000), --reps N (default 2), --size N (default 100), --base DIST.

import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { boundedFlag } from './lib/bounded-flag.mjs';
import { openServer } from './lib/server.mjs';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '20000' },
    reps: { type: 'string', default: '2' },
    size: { type: 'string', default: '100' },
    base: { type: 'string' },
  },
});
const jobs = boundedFlag('bench:batch', values.jobs, 'jobs', 100, 500_000);
const reps = boundedFlag('bench:batch', values.reps, 'reps', 1, 10);
const size = boundedFlag('bench:batch', values.size, 'size', 1, 1000);

const current = await import('../dist/index.js');
const base = values.base ? await import(pathToFileURL(`${values.base}/index.js`).href) : null;

const QUEUES = {
  single: () => ({ concurrency: size, handler: async () => {} }),
  batch: () => ({ batch: { size }, handler: async () => {} }),
  'single-call': (lh) => ({ concurrency: size, handler: () => lh.pool.query('SELECT 1') }),
  'batch-call': (lh) => ({ batch: { size }, handler: async () => void (await lh.pool.query('SELECT 1')) }),
};

async function measure(connectionString, pkg, kind, label) {
  const schema = `bench_batch_${label.replace(/-/g, '_')}_${process.pid}`;
  const lh = new pkg.Leasehold({ connectionString, schema, poolSize: 10 });
  await lh.migrate();
  for (let i = 0; i < jobs; i += 1000) {
    const n = Math.min(1000, jobs - i);
    await lh.enqueueMany(
      'bench',
      Array.from({ length: n }, () => ({ payload: {} })),
    );
  }
  const worker = lh.worker({ queues: { bench: QUEUES[kind](lh) }, pollIntervalMs: 50 });
  const startedAt = performance.now();
  await worker.start();
  while (worker.counters.completed < jobs) {
    if (performance.now() - startedAt > 300_000) throw new Error(`${label}: timed out`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const ms = performance.now() - startedAt;
  await worker.stop();
  await lh.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  await lh.close();
  return ms;
}

const server = await openServer();
try {
  const variants = [
    ['single', current, 'single'],
    ...(base ? [['single-base', base, 'single']] : []),
    ['batch', current, 'batch'],
    ['single-call', current, 'single-call'],
    ['batch-call', current, 'batch-call'],
  ];
  const times = Object.fromEntries(variants.map(([label]) => [label, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (const [label, pkg, kind] of rep % 2 === 0 ? variants : [...variants].reverse()) {
      const ms = await measure(server.connectionString, pkg, kind, label);
      times[label].push(ms);
      console.error(`[bench:batch] rep ${rep + 1} ${label}: ${Math.round((jobs / ms) * 1000)} jobs/s`);
    }
  }
  const rate = (label) => (jobs / Math.min(...times[label])) * 1000;
  console.log(
    `${jobs} no-op jobs per variant, batch size and single concurrency ${size}, best of ${reps}; one server, one run`,
  );
  console.log('| variant | jobs/s | ratio to its single-job variant |');
  console.log('| --- | --- | --- |');
  for (const [label] of variants) {
    const against = label.endsWith('-call') ? 'single-call' : 'single';
    console.log(`| ${label} | ${Math.round(rate(label))} | ${(rate(label) / rate(against)).toFixed(2)} |`);
  }
} finally {
  await server.stop();
}
