// `npm run bench:transaction`: the cost per job of `job.transaction`, and the hot path of handlers
// that do not use it, in one run on one server. Variants, interleaved rep by rep:
//   plain        a no-op handler (the batched completion only);
//   plain-base   the same on a build of an earlier commit (`--base DIST`, optional): hot path unchanged?
//   autocommit   one INSERT of the handler's own on the pool, then the batched completion (two commits);
//   transaction  the same INSERT in job.transaction, committed with the job's own completion.
// Flags: --jobs N (default 4000), --reps N (default 2), --concurrency N (default 16), --base DIST.

import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { boundedFlag } from './lib/bounded-flag.mjs';
import { openServer } from './lib/server.mjs';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '4000' },
    reps: { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '16' },
    base: { type: 'string' },
  },
});
const jobs = boundedFlag('bench:transaction', values.jobs, 'jobs', 100, 200_000);
const reps = boundedFlag('bench:transaction', values.reps, 'reps', 1, 10);
const concurrency = boundedFlag('bench:transaction', values.concurrency, 'concurrency', 1, 200);

const current = await import('../dist/index.js');
const base = values.base ? await import(pathToFileURL(`${values.base}/index.js`).href) : null;

const HANDLERS = {
  plain: () => async () => {},
  autocommit: (lh, schema) => async (job) => {
    await lh.pool.query(`INSERT INTO "${schema}".effects (job_id) VALUES ($1)`, [job.id]);
  },
  transaction: (_lh, schema) => (job) =>
    job.transaction((client) =>
      client.query(`INSERT INTO "${schema}".effects (job_id) VALUES ($1)`, [job.id]),
    ),
};

async function measure(connectionString, pkg, kind, label) {
  const schema = `bench_tx_${label.replace(/-/g, '_')}_${process.pid}`;
  const lh = new pkg.Leasehold({ connectionString, schema, poolSize: 10 });
  await lh.migrate();
  await lh.pool.query(`CREATE TABLE "${schema}".effects (job_id bigint NOT NULL)`);
  for (let i = 0; i < jobs; i += 1000) {
    const n = Math.min(1000, jobs - i);
    await lh.enqueueMany(
      'bench',
      Array.from({ length: n }, () => ({ payload: {} })),
    );
  }
  const worker = lh.worker({
    queues: { bench: { concurrency, handler: HANDLERS[kind](lh, schema) } },
    pollIntervalMs: 50,
  });
  const startedAt = performance.now();
  await worker.start();
  while (worker.counters.completed < jobs) {
    if (performance.now() - startedAt > 300_000) throw new Error(`${label}: timed out`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const ms = performance.now() - startedAt;
  await worker.stop();
  const { rows } = await lh.pool.query(`SELECT count(*)::int AS n FROM "${schema}".effects`);
  if (kind !== 'plain' && rows[0].n !== jobs)
    throw new Error(`${label}: ${rows[0].n} effects for ${jobs} jobs`);
  await lh.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  await lh.close();
  return ms;
}

const server = await openServer();
try {
  const variants = [
    ['plain', current, 'plain'],
    ...(base ? [['plain-base', base, 'plain']] : []),
    ['autocommit', current, 'autocommit'],
    ['transaction', current, 'transaction'],
  ];
  const times = Object.fromEntries(variants.map(([label]) => [label, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (const [label, pkg, kind] of rep % 2 === 0 ? variants : [...variants].reverse()) {
      const ms = await measure(server.connectionString, pkg, kind, label);
      times[label].push(ms);
      console.error(`[bench:transaction] rep ${rep + 1} ${label}: ${Math.round((jobs / ms) * 1000)} jobs/s`);
    }
  }
  const best = (label) => Math.min(...times[label]);
  const rate = (label) => (jobs / best(label)) * 1000;
  const perJobUs = (label) => (best(label) * 1000) / jobs;
  console.log(`${jobs} jobs per variant, concurrency ${concurrency}, best of ${reps}; one server, one run`);
  console.log('| variant | jobs/s | µs per job (wall) | ratio to plain |');
  console.log('| --- | --- | --- | --- |');
  for (const [label] of variants) {
    console.log(
      `| ${label} | ${Math.round(rate(label))} | ${Math.round(perJobUs(label))} | ${(rate(label) / rate('plain')).toFixed(2)} |`,
    );
  }
  console.log(
    `job.transaction vs autocommit write: ${(rate('transaction') / rate('autocommit')).toFixed(2)}× the throughput, ` +
      `${Math.round(perJobUs('transaction') - perJobUs('autocommit'))} µs per job more`,
  );
} finally {
  await server.stop();
}
