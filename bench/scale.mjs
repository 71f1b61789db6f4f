// `npm run bench:scale`: does claiming and completing stay flat as the backlog grows?
// Fills one queue to 1k, 10k, 100k and 1M pending jobs and times a claim of 64 and the fenced
// completion of those 64 (median of many rounds), then prints EXPLAIN (ANALYZE, BUFFERS) of both
// at the largest size. Uses DATABASE_URL, or an embedded PostgreSQL.
import pg from 'pg';
import { Leasehold, startEmbeddedPostgres } from '../dist/index.js';

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

async function measure(lh) {
  const claims = [];
  const completions = [];
  for (let round = 0; round < ROUNDS; round++) {
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

async function explain(pool) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const claim = await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
      WITH candidate AS (
        SELECT id FROM ${SCHEMA}.jobs
        WHERE queue_name = 'scale' AND status = 'pending' AND available_at <= now()
        ORDER BY priority DESC, available_at, id
        LIMIT ${BATCH}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE ${SCHEMA}.jobs AS j
      SET status = 'running', attempt_count = j.attempt_count + 1, lease_owner = 'explain',
          lease_token = j.lease_token + 1, lease_expires_at = now() + interval '60 seconds', claimed_at = now()
      FROM candidate WHERE j.id = candidate.id
      RETURNING j.id, j.lease_token`);
    const { rows } = await client.query(
      `SELECT array_agg(id) AS ids, array_agg(lease_token) AS tokens FROM ${SCHEMA}.jobs WHERE lease_owner = 'explain'`,
    );
    const complete = await client.query(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
      WITH input AS (
        SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS t(id, token, owner, queue_name)
      ),
      changed AS (
        DELETE FROM ${SCHEMA}.jobs AS j USING input
        WHERE j.id = input.id AND j.status = 'running' AND j.lease_owner = input.owner
          AND j.lease_token = input.token AND j.lease_expires_at > now()
        RETURNING j.id, j.queue_name, j.priority, j.attempt_count, j.max_attempts, j.lease_owner,
                  j.lease_token, j.created_at, j.claimed_at
      ),
      finished AS (
        INSERT INTO ${SCHEMA}.finished_jobs (id, queue_name, priority, attempt_count, max_attempts, lease_owner,
                                             lease_token, created_at, claimed_at, finished_at)
        SELECT id, queue_name, priority, attempt_count, max_attempts, lease_owner, lease_token, created_at, claimed_at, now()
        FROM changed
      )
      SELECT id FROM changed`,
      [rows[0].ids, rows[0].tokens, rows[0].ids.map(() => 'explain'), rows[0].ids.map(() => 'scale')],
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

const server = process.env.DATABASE_URL ? null : await startEmbeddedPostgres();
const connectionString = process.env.DATABASE_URL ?? server.connectionString;
const pool = new pg.Pool({ connectionString, max: 2 });
const lh = new Leasehold({ connectionString, schema: SCHEMA, poolSize: 2 });
try {
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await lh.migrate();
  const results = [];
  for (const size of SIZES) {
    await fillTo(lh, pool, size);
    const result = await measure(lh);
    results.push({ size, ...result });
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
  const plans = await explain(pool);
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
  await server?.stop();
}
