// What the hot path costs when the claim and the completion run through SECURITY DEFINER functions
// (the design of issue 17 for the worker role) instead of as direct statements, measured in one run
// on one server: the same statement text (captured from src/storage, so both sides run exactly the
// same SQL), as a LANGUAGE sql and as a PL/pgSQL function, against the direct prepared statement.
//
//   npm run build && node bench/definer.mjs [--jobs 4000] [--batch 50] [--rounds 3]
//
// One client, sequential batches: the ratio is the per-statement overhead of the function call
// (planning inside the function, the security context switch), which is what the design adds.

import { parseArgs } from 'node:util';
import pg from 'pg';
import { Leasehold } from '../dist/index.js';
import { claimJobs } from '../dist/storage/claim.js';
import { completeJobs } from '../dist/storage/complete.js';
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

/** The statement a storage call sends, without sending it. */
async function captured(call) {
  let config = null;
  await call({
    query: async (c) => {
      config = c;
      return { rows: [], rowCount: 0, fields: [] };
    },
  });
  return config.text;
}

const CLAIM_COLUMNS = `id bigint, payload jsonb, lease_token bigint, lease_claim_id bigint, attempt_count integer,
  max_attempts integer, priority integer, lease_expires_ms double precision, available_ms double precision`;
const CLAIM_PARAMS = 'text, text, integer, double precision, bigint, timestamptz';
const COMPLETE_COLUMNS = 'id bigint, repair text[], woken bigint';
const COMPLETE_PARAMS = 'bigint[], bigint[], bigint[], text[], text[], text';

function definer(name, params, columns, language, body) {
  const text =
    language === 'sql'
      ? body
      : `#variable_conflict use_column
         BEGIN RETURN QUERY ${body}; END`;
  return `CREATE FUNCTION ${Q}.${name}(${params}) RETURNS TABLE (${columns})
    LANGUAGE ${language} SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $fn$ ${text} $fn$`;
}

const server = await openServer();
const lh = new Leasehold({ connectionString: server.connectionString, schema: SCHEMA, listen: false });
const admin = new pg.Client({ connectionString: server.connectionString });
await admin.connect();
await admin.query(`DROP SCHEMA IF EXISTS ${Q} CASCADE`);
await lh.migrate();
const claimSql = await captured((db) =>
  claimJobs(db, SCHEMA, { queue: 'q', owner: 'w', limit: 1, leaseMs: 1000 }),
);
const completeSql = await captured((db) =>
  completeJobs(db, SCHEMA, [{ jobId: '1', token: '1', claimId: '1', owner: 'w', queue: 'q' }]),
);
for (const language of ['sql', 'plpgsql']) {
  await admin.query(definer(`claim_${language}`, CLAIM_PARAMS, CLAIM_COLUMNS, language, claimSql));
  await admin.query(
    definer(`complete_${language}`, COMPLETE_PARAMS, COMPLETE_COLUMNS, language, completeSql),
  );
}

const db = new pg.Client({ connectionString: server.connectionString });
await db.connect();
const modes = {
  direct: { claim: claimSql, complete: completeSql },
  sql: {
    claim: `SELECT * FROM ${Q}.claim_sql($1, $2, $3, $4, $5, $6)`,
    complete: `SELECT * FROM ${Q}.complete_sql($1, $2, $3, $4, $5, $6)`,
  },
  plpgsql: {
    claim: `SELECT * FROM ${Q}.claim_plpgsql($1, $2, $3, $4, $5, $6)`,
    complete: `SELECT * FROM ${Q}.complete_plpgsql($1, $2, $3, $4, $5, $6)`,
  },
};

/** Enqueues JOBS jobs, then claims and completes them in batches of BATCH; returns jobs/s. */
async function round(mode) {
  const queue = `q_${mode}`;
  for (let i = 0; i < JOBS; i += 1000) {
    await lh.enqueueMany(
      queue,
      Array.from({ length: Math.min(1000, JOBS - i) }, (_, n) => ({ payload: { n } })),
    );
  }
  const { claim, complete } = modes[mode];
  const started = performance.now();
  let done = 0;
  for (;;) {
    const claimId = String(BigInt.asIntN(64, BigInt(Math.floor(Math.random() * 2 ** 53))));
    const { rows } = await db.query({
      name: `${mode}_claim`,
      text: claim,
      values: [queue, 'bench', BATCH, 60_000, claimId, '-infinity'],
    });
    if (rows.length === 0) break;
    const completed = await db.query({
      name: `${mode}_complete`,
      text: complete,
      values: [
        rows.map((r) => r.id),
        rows.map((r) => r.lease_token),
        rows.map((r) => r.lease_claim_id),
        rows.map(() => 'bench'),
        rows.map(() => queue),
        `${SCHEMA}_bench_channel`,
      ],
    });
    if (completed.rows.length !== rows.length) throw new Error(`${mode}: a completion was refused`);
    done += rows.length;
  }
  if (done !== JOBS) throw new Error(`${mode}: ${done} of ${JOBS} jobs ran`);
  return JOBS / ((performance.now() - started) / 1000);
}

console.log(formatEnvironment(await describeEnvironment(admin), server));
const rates = { direct: [], sql: [], plpgsql: [] };
for (let r = 0; r < ROUNDS; r++) {
  // Interleaved, so drift in the machine's load falls on every mode alike.
  for (const mode of Object.keys(rates)) rates[mode].push(await round(mode));
  await admin.query(`TRUNCATE ${Q}.finished_jobs`);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`Load average at end: ${loadAverage()}`);
console.log(`${JOBS} jobs per round, batches of ${BATCH}, ${ROUNDS} rounds, one client`);
console.log('| path | claim + complete (jobs/s, median) | vs direct |');
console.log('| --- | ---: | ---: |');
for (const mode of Object.keys(rates)) {
  const rate = median(rates[mode]);
  console.log(`| ${mode} | ${Math.round(rate)} | ${(rate / median(rates.direct)).toFixed(2)} |`);
}
await db.end();
await admin.query(`DROP SCHEMA IF EXISTS ${Q} CASCADE`);
await admin.end();
await lh.close();
await server.stop();
