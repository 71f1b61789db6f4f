// Flows at scale: one root -> 10,000 children -> one join, drained by 4 claimers in batches of 500,
// against the same number of plain Leasehold jobs and of raw-SQL jobs (the seed's statements)
// drained the same way, in the same run (medians of 3 rounds; ratios to raw SQL). Counts every
// statement the flow's drain sends: the releases ride in the completions, so the drain sends
// exactly one statement per claim batch and one per completion batch, none per child.
// `npm run build && node bench/flows.mjs` (DATABASE_URL, or an embedded server).
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Leasehold } from '../dist/index.js';
import { createRawSchema, RAW_INSERT_MANY, RAW_QUEUE, rawClaim, rawComplete } from './lib/raw-sql.mjs';
import { openServer } from './lib/server.mjs';
import { median } from './lib/stats.mjs';

const CHILDREN = 10_000;
const JOBS = CHILDREN + 2;
const CLAIMERS = 4;
const BATCH = 500;
const ROUNDS = 3;

// Claims and completes from `queue` until `total` jobs are done; returns the statements sent.
async function drain(claim, complete, total) {
  let done = 0;
  let statements = 0;
  const claimer = async (n) => {
    let empty = 0;
    while (done < total && empty < 2000) {
      const rows = await claim(n);
      statements++;
      if (rows.length === 0) {
        empty++;
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      empty = 0;
      await complete(n, rows);
      statements++;
      done += rows.length;
    }
  };
  await Promise.all(Array.from({ length: CLAIMERS }, (_, n) => claimer(n)));
  if (done !== total) throw new Error(`${done} of ${total} jobs done`);
  return statements;
}

async function leasehold(connectionString, round, flow) {
  const schema = `bench_flows_${round}_${flow ? 'flow' : 'plain'}`;
  const lh = new Leasehold({ connectionString, schema, poolSize: CLAIMERS + 2 });
  await lh.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await lh.migrate();
  const queue = 'bench';
  const enqueueStarted = performance.now();
  if (flow) {
    await lh.enqueueFlow([
      { ref: 'root', queue, payload: {} },
      ...Array.from({ length: CHILDREN }, (_, i) => ({
        ref: `c${i}`,
        queue,
        payload: {},
        dependsOn: ['root'],
      })),
      { ref: 'join', queue, payload: {}, dependsOn: Array.from({ length: CHILDREN }, (_, i) => `c${i}`) },
    ]);
  } else {
    await lh.enqueueMany(
      queue,
      Array.from({ length: CHILDREN }, () => ({ payload: {} })),
    );
    await lh.enqueueMany(queue, [{ payload: {} }, { payload: {} }]);
  }
  const enqueueMs = performance.now() - enqueueStarted;
  await lh.pool.query(`VACUUM ANALYZE "${schema}".jobs`);
  let rootReleaseMs = null;
  const started = performance.now();
  const statements = await drain(
    (n) => lh.claim({ queue, owner: `c${n}`, limit: BATCH }),
    async (_n, leases) => {
      const t = performance.now();
      await lh.completeMany(leases);
      if (flow && rootReleaseMs === null) rootReleaseMs = performance.now() - t;
    },
    JOBS,
  );
  const drainMs = performance.now() - started;
  await lh.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  await lh.close();
  return { enqueueMs, drainMs, statements, rootReleaseMs };
}

async function raw(connectionString) {
  const pool = new pg.Pool({ connectionString, max: CLAIMERS + 2 });
  await createRawSchema(pool);
  const started0 = performance.now();
  await pool.query({ ...RAW_INSERT_MANY, values: [RAW_QUEUE, Array.from({ length: JOBS }, () => '{}')] });
  const enqueueMs = performance.now() - started0;
  await pool.query('VACUUM ANALYZE bench_raw.jobs');
  const started = performance.now();
  const statements = await drain(
    (n) => rawClaim(pool, `c${n}`, BATCH),
    (n, rows) => rawComplete(pool, `c${n}`, rows),
    JOBS,
  );
  const drainMs = performance.now() - started;
  await pool.query('DROP SCHEMA bench_raw CASCADE');
  await pool.end();
  return { enqueueMs, drainMs, statements, rootReleaseMs: null };
}

const server = await openServer({ settings: {} });
try {
  const runs = { raw: [], plain: [], flow: [] };
  for (let round = 0; round < ROUNDS; round++) {
    runs.raw.push(await raw(server.connectionString));
    runs.plain.push(await leasehold(server.connectionString, round, false));
    runs.flow.push(await leasehold(server.connectionString, round, true));
  }
  const m = (name, key) => median(runs[name].map((r) => r[key]));
  console.log(
    `${JOBS} jobs (flow: 1 root -> ${CHILDREN} children -> 1 join), ${CLAIMERS} claimers, batches of ${BATCH}, median of ${ROUNDS}`,
  );
  console.log('variant   enqueue ms   drain ms   jobs/s   statements   drain ratio to raw');
  for (const name of ['raw', 'plain', 'flow']) {
    const drainMs = m(name, 'drainMs');
    console.log(
      `${name.padEnd(8)} ${m(name, 'enqueueMs').toFixed(0).padStart(10)} ${drainMs.toFixed(0).padStart(10)} ${(JOBS / (drainMs / 1000)).toFixed(0).padStart(8)} ${m(name, 'statements').toFixed(0).padStart(12)}   ${(m('raw', 'drainMs') / drainMs).toFixed(2)}`,
    );
  }
  console.log(
    `root completion releasing ${CHILDREN} children (one statement): ${m('flow', 'rootReleaseMs').toFixed(0)} ms`,
  );
} finally {
  await server.stop();
}
process.exit(0);
