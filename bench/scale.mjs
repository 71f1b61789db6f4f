// `npm run bench:scale`: does claiming and completing stay flat as the backlog grows?
// Fills one queue to 1k, 10k, 100k and 1M pending jobs (SCALE_SIZES=1000,...,10000000 for more) and
// times a claim of 64 and the fenced completion of those 64 (median of many rounds); takes
// EXPLAIN (ANALYZE, BUFFERS) of both at each size, printing each plan's totals, and the whole plans
// at the largest size. Uses DATABASE_URL, or an embedded PostgreSQL.
import pg from 'pg';
import { Leasehold } from '../dist/index.js';
import { openServer } from './lib/server.mjs';

const SIZES = (process.env.SCALE_SIZES ?? '1000,10000,100000,1000000').split(',').map(Number);
const BATCH = 64;
const ROUNDS = 60;
const SCHEMA = 'leasehold_scale';

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

async function fillTo(lh, pool, target) {
  const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.jobs WHERE status = 'pending'`);
  let missing = target - rows[0].n;
  while (missing > 0) {
    const count = Math.min(10_000, missing);
    await lh.enqueueMany(
      'scale',
      Array.from({ length: count }, (_, i) => ({ payload: { i } })),
    );
    missing -= count;
  }
  await pool.query(`VACUUM ANALYZE ${SCHEMA}.jobs`);
}

async function measure(lh, size) {
  const claims = [];
  const completions = [];
  // Never drain more than half the backlog, so the smallest size is measured at its size too.
  const rounds = Math.max(5, Math.min(ROUNDS, Math.floor(size / BATCH / 2)));
  for (let round = 0; round < rounds; round++) {
    let started = performance.now();
    const leases = await lh.claim({ queue: 'scale', owner: 'scale-bench', limit: BATCH, leaseMs: 60_000 });
    claims.push(performance.now() - started);
    started = performance.now();
    // One fenced statement for the whole batch, as the worker sends it.
    const accepted = (await lh.completeMany(leases)).size;
    completions.push(performance.now() - started);
    if (accepted !== leases.length) throw new Error(`completed ${accepted} of ${leases.length}`);
  }
  return { claimMs: median(claims), completeMs: median(completions) };
}

// EXPLAINs the library's own prepared statements, so the plans shown are the ones that run:
// the client has a single connection, on which claim and completion were already prepared.
async function explain(lh) {
  const prepared = async (prefix) => {
    const { rows } = await lh.pool.query(
      `SELECT name FROM pg_prepared_statements WHERE name LIKE $1 || '%' ORDER BY prepare_time DESC LIMIT 1`,
      [prefix],
    );
    if (!rows[0]) throw new Error(`statement ${prefix} was not prepared on this connection`);
    return rows[0].name;
  };
  const claimName = await prepared('leasehold_claim_jobs_');
  const completeName = await prepared('leasehold_complete_jobs_');
  const client = await lh.pool.connect();
  try {
    await client.query('BEGIN');
    const claim = await client.query(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE ${claimName}('scale', 'explain', ${BATCH}, 60000, 12345, '-infinity')`,
    );
    const { rows } = await client.query(
      `SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens, array_agg(lease_claim_id) AS claims FROM ${SCHEMA}.jobs WHERE lease_owner = 'explain'`,
    );
    const ids = `ARRAY[${rows[0].ids.join(',')}]::bigint[]`;
    const tokens = `ARRAY[${rows[0].tokens.join(',')}]::bigint[]`;
    const claims = `ARRAY[${rows[0].claims.join(',')}]::bigint[]`;
    const owners = `array_fill('explain'::text, ARRAY[${rows[0].ids.length}])`;
    const queues = `array_fill('scale'::text, ARRAY[${rows[0].ids.length}])`;
    const complete = await client.query(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE ${completeName}(${ids}, ${tokens}, ${claims}, ${owners}, ${queues}, '${SCHEMA}_wakeup', '${SCHEMA}_finished')`,
    );
    await client.query('ROLLBACK');
    return {
      claim: claim.rows.map((r) => r['QUERY PLAN']).join('\n'),
      complete: complete.rows.map((r) => r['QUERY PLAN']).join('\n'),
    };
  } finally {
    client.release();
  }
}

const server = await openServer({ settings: {} });
const { connectionString } = server;
const pool = new pg.Pool({ connectionString, max: 2 });
const lh = new Leasehold({ connectionString, schema: SCHEMA, poolSize: 1 });
try {
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await lh.migrate();
  const results = [];
  for (const size of SIZES) {
    await fillTo(lh, pool, size);
    const result = await measure(lh, size);
    const plans = await explain(lh);
    results.push({ size, ...result, plans });
    console.error(
      `pending ${size}: claim ${result.claimMs.toFixed(2)} ms, complete ${result.completeMs.toFixed(2)} ms`,
    );
  }
  const base = results[0];
  console.log(
    `| pending jobs | claim ${BATCH} (median ms) | vs smallest | complete ${BATCH} (median ms) | vs smallest |`,
  );
  console.log('| ---: | ---: | ---: | ---: | ---: |');
  for (const r of results) {
    console.log(
      `| ${r.size.toLocaleString('en')} | ${r.claimMs.toFixed(2)} | ${(r.claimMs / base.claimMs).toFixed(2)}× | ${r.completeMs.toFixed(2)} | ${(r.completeMs / base.completeMs).toFixed(2)}× |`,
    );
  }
  // A plan's totals: its execution time and the buffers its top node touched.
  const totals = (plan) => {
    const lines = plan.split('\n');
    const time =
      lines.find((line) => line.startsWith('Execution Time'))?.replace('Execution Time: ', '') ?? '?';
    const buffers =
      lines
        .find((line) => line.trim().startsWith('Buffers:'))
        ?.trim()
        .replace('Buffers: ', '') ?? '?';
    return `${time} (${buffers})`;
  };
  console.log('\n| pending jobs | EXPLAIN ANALYZE of the claim | of the completion |');
  console.log('| ---: | --- | --- |');
  for (const r of results) {
    console.log(
      `| ${r.size.toLocaleString('en')} | ${totals(r.plans.claim)} | ${totals(r.plans.complete)} |`,
    );
  }
  const { plans } = results.at(-1);
  console.log(
    `\nClaim of ${BATCH} at ${SIZES.at(-1).toLocaleString('en')} pending:\n\n\`\`\`\n${plans.claim}\n\`\`\``,
  );
  console.log(
    `\nCompletion of ${BATCH} at ${SIZES.at(-1).toLocaleString('en')} pending:\n\n\`\`\`\n${plans.complete}\n\`\`\``,
  );
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
  await lh.close();
  await pool.end();
  await server.stop();
}
