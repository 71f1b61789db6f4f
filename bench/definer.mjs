// What the hot path costs through the schema's SECURITY DEFINER functions (issue 17: the producer
// and worker roles write only through them) against the direct statements, in one run on one
// server: the same storage calls, once on a client that runs the statements and once on a client
// routed through the functions migrate() installed (src/storage/roles/functions.ts: the body of each
// function is the statement's own text).
//
//   npm run build && node bench/definer.mjs [--jobs 4000] [--batch 50] [--rounds 3]
//
// One client per path, sequential batches, interleaved rounds: the ratio is the per-statement
// overhead of the function call (its planning, the security context switch, the pinned
// search_path), which is what the roles add. Enqueue is measured the same way (enqueueMany, one
// statement per batch).

import { parseArgs } from 'node:util';
import pg from 'pg';
import { Leasehold } from '../dist/index.js';
import { routeOn } from '../dist/storage/db.js';
import { insertJobs } from '../dist/storage/jobs/enqueue.js';
import { claimJobs } from '../dist/storage/leases/claim.js';
import { completeJobs } from '../dist/storage/leases/complete.js';
import { functionRoutes } from '../dist/storage/roles/functions.js';
import { describeEnvironment, formatEnvironment, loadAverage } from './lib/environment.mjs';
import { openServer } from './lib/server.mjs';

const { values: args } = parseArgs({
  options: {
    jobs: { type: 'string', default: '4000' },
    batch: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '3' },
  },
});
const JOBS = Number(args.jobs);
const BATCH = Number(args.batch);
const ROUNDS = Number(args.rounds);
const SCHEMA = `bench_definer_${process.pid}`;
const Q = `"${SCHEMA}"`;

const server = await openServer();
const lh = new Leasehold({ connectionString: server.connectionString, schema: SCHEMA, listen: false });
const admin = new pg.Client({ connectionString: server.connectionString });
await admin.connect();
await admin.query(`DROP SCHEMA IF EXISTS ${Q} CASCADE`);
await lh.migrate();

const clients = {};
for (const mode of ['direct', 'functions']) {
  const client = new pg.Client({ connectionString: server.connectionString });
  await client.connect();
  if (mode === 'functions') routeOn(client, functionRoutes(SCHEMA));
  clients[mode] = client;
}

const job = (n) => ({
  payloadJson: JSON.stringify({ n }),
  priority: 0,
  runAt: null,
  delayMs: 0,
  maxAttempts: 25,
  orderingKey: null,
  concurrencyKey: null,
});

/** Enqueues JOBS jobs in batches of BATCH, then claims and completes them; returns both rates. */
async function round(mode) {
  const db = clients[mode];
  const queue = `q_${mode}`;
  let started = performance.now();
  for (let i = 0; i < JOBS; i += BATCH) {
    await insertJobs(
      db,
      SCHEMA,
      queue,
      Array.from({ length: Math.min(BATCH, JOBS - i) }, (_, n) => job(i + n)),
      { notify: false },
    );
  }
  const enqueueRate = JOBS / ((performance.now() - started) / 1000);
  started = performance.now();
  let done = 0;
  for (;;) {
    const rows = await claimJobs(db, SCHEMA, { queue, owner: 'bench', limit: BATCH, leaseMs: 60_000 });
    if (rows.length === 0) break;
    const refs = rows.map((r) => ({
      jobId: r.id,
      token: r.lease_token,
      claimId: r.lease_claim_id,
      owner: 'bench',
      queue,
    }));
    const completed = await completeJobs(db, SCHEMA, refs);
    if (completed.size !== rows.length) throw new Error(`${mode}: a completion was refused`);
    done += rows.length;
  }
  if (done !== JOBS) throw new Error(`${mode}: ${done} of ${JOBS} jobs ran`);
  return { enqueue: enqueueRate, run: JOBS / ((performance.now() - started) / 1000) };
}

console.log(formatEnvironment(await describeEnvironment(admin), server));
const rates = { direct: [], functions: [] };
for (let r = 0; r < ROUNDS; r++) {
  // Interleaved, so drift in the machine's load falls on both paths alike.
  for (const mode of Object.keys(rates)) rates[mode].push(await round(mode));
  await admin.query(`TRUNCATE ${Q}.finished_jobs`);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`Load average at end: ${loadAverage()}`);
console.log(`${JOBS} jobs per round, batches of ${BATCH}, ${ROUNDS} rounds, one client per path`);
console.log('| path | enqueueMany (jobs/s) | vs direct | claim + complete (jobs/s) | vs direct |');
console.log('| --- | ---: | ---: | ---: | ---: |');
const base = {
  enqueue: median(rates.direct.map((r) => r.enqueue)),
  run: median(rates.direct.map((r) => r.run)),
};
for (const mode of Object.keys(rates)) {
  const enqueue = median(rates[mode].map((r) => r.enqueue));
  const run = median(rates[mode].map((r) => r.run));
  console.log(
    `| ${mode} | ${Math.round(enqueue)} | ${(enqueue / base.enqueue).toFixed(2)} | ${Math.round(run)} | ${(run / base.run).toFixed(2)} |`,
  );
}
for (const client of Object.values(clients)) await client.end();
await admin.query(`DROP SCHEMA IF EXISTS ${Q} CASCADE`);
for (const kind of ['producer', 'worker', 'admin'])
  await admin.query(`DROP ROLE IF EXISTS "${SCHEMA}_${kind}"`);
await admin.end();
await lh.close();
await server.stop();
