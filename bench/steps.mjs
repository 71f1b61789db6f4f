// `npm run bench:steps`: what a durable step costs, in one run on one server. Two variants doing
// the same ten units of work per workflow, interleaved rep by rep:
//   steps   one job whose handler calls job.step ten times (each step's result recorded, fenced);
//   chain   ten jobs, each job's handler enqueueing the next (lh.enqueue), the last enqueueing none.
// Reported per unit of work (a step, or a chained job): wall time and round trips (statements the
// workers' pool sent, claims, completions and idle polls included), and the ratio of the two.
// Plain jobs that use no step are unchanged by steps (`npm run bench:ab` measures that).
// Flags: --workflows N (default 500), --reps N (default 2), --concurrency N (default 16).

import { parseArgs } from 'node:util';
import pg from 'pg';
import { Leasehold } from '../dist/index.js';
import { boundedFlag } from './lib/bounded-flag.mjs';
import { openServer } from './lib/server.mjs';

const STEPS = 10;
const { values } = parseArgs({
  options: {
    workflows: { type: 'string', default: '500' },
    reps: { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '16' },
  },
});
const workflows = boundedFlag('bench:steps', values.workflows, 'workflows', 10, 100_000);
const reps = boundedFlag('bench:steps', values.reps, 'reps', 1, 10);
const concurrency = boundedFlag('bench:steps', values.concurrency, 'concurrency', 1, 200);

// A pool that counts every statement its clients send (pool.query goes through a client too).
function countingPool(connectionString) {
  const pool = new pg.Pool({ connectionString, max: 10 });
  pool.on('error', () => {}); // the server's stop ends idle clients
  const counter = { statements: 0 };
  pool.on('connect', (client) => {
    const query = client.query.bind(client);
    client.query = (...args) => {
      counter.statements++;
      return query(...args);
    };
  });
  return { pool, counter };
}

async function measure(connectionString, kind) {
  const schema = `bench_steps_${kind}_${process.pid}`;
  const admin = new Leasehold({ connectionString, schema, poolSize: 2 });
  admin.pool.on('error', () => {});
  await admin.migrate();
  const { pool, counter } = countingPool(connectionString);
  const lh = new Leasehold({ pool, schema });
  const handler =
    kind === 'steps'
      ? async (job) => {
          for (let i = 0; i < STEPS; i++) await job.step(`unit-${i}`, () => i);
        }
      : async (job) => {
          const left = job.payload.left;
          if (left > 1) await lh.enqueue('bench', { left: left - 1 });
        };
  const first = kind === 'steps' ? {} : { left: STEPS };
  for (let i = 0; i < workflows; i += 1000) {
    const n = Math.min(1000, workflows - i);
    await admin.enqueueMany(
      'bench',
      Array.from({ length: n }, () => ({ payload: first })),
    );
  }
  const expected = kind === 'steps' ? workflows : workflows * STEPS;
  const worker = lh.worker({ queues: { bench: { concurrency, handler } }, pollIntervalMs: 50 });
  const before = counter.statements;
  const startedAt = performance.now();
  await worker.start();
  while (worker.counters.completed < expected) {
    if (performance.now() - startedAt > 600_000) throw new Error(`${kind}: timed out`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const ms = performance.now() - startedAt;
  const statements = counter.statements - before;
  await worker.stop();
  if (kind === 'steps') {
    const { rows } = await admin.pool.query(
      `SELECT count(*)::int AS n FROM "${schema}".job_steps WHERE kind = 'step'`,
    );
    if (rows[0].n !== workflows * STEPS)
      throw new Error(`steps: ${rows[0].n} recorded, not ${workflows * STEPS}`);
  }
  await admin.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  await lh.close();
  await pool.end();
  await admin.close();
  return { ms, statements };
}

const server = await openServer();
try {
  const kinds = ['steps', 'chain'];
  const runs = { steps: [], chain: [] };
  for (let rep = 0; rep < reps; rep++) {
    for (const kind of rep % 2 === 0 ? kinds : [...kinds].reverse()) {
      const run = await measure(server.connectionString, kind);
      runs[kind].push(run);
      console.error(
        `[bench:steps] rep ${rep + 1} ${kind}: ${Math.round(run.ms)} ms, ${run.statements} statements`,
      );
    }
  }
  const units = workflows * STEPS;
  const best = (kind) => runs[kind].reduce((a, b) => (b.ms < a.ms ? b : a));
  const usPerUnit = (kind) => (best(kind).ms * 1000) / units;
  const tripsPerUnit = (kind) => best(kind).statements / units;
  console.log(
    `${workflows} workflows of ${STEPS} units (${units} units) per variant, concurrency ${concurrency}, best of ${reps}; one server, one run`,
  );
  console.log('| variant | µs per unit (wall) | round trips per unit | units/s |');
  console.log('| --- | --- | --- | --- |');
  for (const [kind, label] of [
    ['steps', `steps: one job, ${STEPS} job.step calls`],
    ['chain', `chain: ${STEPS} jobs, each enqueueing the next`],
  ]) {
    console.log(
      `| ${label} | ${Math.round(usPerUnit(kind))} | ${tripsPerUnit(kind).toFixed(2)} | ${Math.round(units / (best(kind).ms / 1000))} |`,
    );
  }
  console.log(
    `steps vs chained jobs: ${(usPerUnit('chain') / usPerUnit('steps')).toFixed(2)}× the throughput, ` +
      `${(tripsPerUnit('steps') / tripsPerUnit('chain')).toFixed(2)}× the round trips per unit`,
  );
} finally {
  await server.stop();
}
