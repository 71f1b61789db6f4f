// Prints the EXPLAIN (ANALYZE, BUFFERS) plan of each dashboard search filter at a million jobs, for
// docs/dashboard-plans.md (the appendix of docs/dashboard.md). Usage: npm run build && node scripts/dashboard-plans.mjs [rows]
// Uses DATABASE_URL when set (a throwaway schema, dropped at the end), else an embedded server.
// The data: `rows` jobs over 5 queues, 90% pending (10% of them behind ordering keys), 200
// running, 8% dead (a few error codes), 2% cancelled, plus rows/10 retained succeeded jobs, keyed
// enqueues for 1% of them. Schedules: 4 whose rows/10 ticks made every tenth job (and rows/100
// ticks made succeeded jobs), and one of 30 ticks. Flows: rows/100 of 10 jobs each over the jobs
// from rows/2 (a chain: each node after the first waits for the one before), every fifth flow not
// started, so its pending children wait (waiting_parents = 1). Then VACUUM ANALYZE.
import pg from 'pg';
import { openServer } from '../bench/lib/server.mjs';
import { Leasehold } from '../dist/index.js';
import { searchCriteria } from '../dist/operations/operator/search.js';
import { searchStatement } from '../dist/storage/operator/search.js';

const rows = Number(process.argv[2] ?? 1_000_000);
const server = await openServer({ settings: {} });
const schema = `lh_plans_${process.pid}`;
const lh = new Leasehold({ connectionString: server.connectionString, schema });
const pool = new pg.Pool({ connectionString: server.connectionString, max: 2 });
const s = `"${schema}"`;
const flows = Math.floor(rows / 100);
const flowBase = Math.floor(rows / 2); // the flows' jobs: flowBase + 1 .. flowBase + 10 * flows
try {
  await lh.migrate();
  await pool.query(
    `
    INSERT INTO ${s}.jobs (queue_name, payload, status, priority, ordering_key, awaits_predecessor,
                           last_error_code, finished_at, lease_owner, lease_expires_at, created_at,
                           waiting_parents, has_children)
    SELECT 'q' || (n % 5), jsonb_build_object('n', n), st.status::${s}.job_status, n % 3,
           CASE WHEN n % 10 = 0 THEN 'key-' || (n % 5000) END,
           st.status = 'pending' AND n % 10 = 0 AND n > 5000,
           CASE st.status WHEN 'dead' THEN 'E' || (n % 7) WHEN 'cancelled' THEN 'CANCELLED' END,
           CASE WHEN st.status IN ('dead', 'cancelled') THEN now() - (n % 86400) * interval '1 second' END,
           CASE WHEN st.status = 'running' THEN 'w' END,
           CASE WHEN st.status = 'running' THEN now() + interval '1 minute' END,
           now() - ($1 - n) * interval '10 ms',
           CASE WHEN fl.node > 0 AND fl.flow % 5 = 0 AND st.status = 'pending' THEN 1 ELSE 0 END,
           coalesce(fl.node < 9, false)
    FROM generate_series(1, $1) AS n,
         LATERAL (SELECT CASE WHEN n > $2 AND n <= $2 + 10 * $3 THEN (n - $2 - 1) / 10 + 1 END AS flow,
                         CASE WHEN n > $2 AND n <= $2 + 10 * $3 THEN (n - $2 - 1) % 10 END AS node) AS fl,
         LATERAL (SELECT CASE WHEN n % 5000 = 1 THEN 'running' WHEN n % 100 < 8 THEN 'dead'
                              WHEN n % 100 < 10 THEN 'cancelled' ELSE 'pending' END AS status) AS st`,
    [rows, flowBase, flows],
  );
  await pool.query(
    `INSERT INTO ${s}.finished_jobs (id, queue_name, priority, attempt_count, max_attempts, lease_owner,
                                      lease_token, created_at, finished_at)
     SELECT 10000000 + n, 'q' || (n % 5), 0, 1, 8, 'w', 1, now() - interval '1 hour', now() - (n % 3600) * interval '1 second'
     FROM generate_series(1, $1) AS n`,
    [rows / 10],
  );
  await pool.query(
    `INSERT INTO ${s}.job_keys (queue_name, idempotency_key, job_id)
     SELECT queue_name, 'order-' || id, id FROM ${s}.jobs WHERE id % 100 = 3`,
  );
  await pool.query(
    `INSERT INTO ${s}.schedule_ticks (schedule_name, tick_at, job_id)
     SELECT 'every-minute-' || (n % 4), now() - n * interval '1 minute', n * 10 - 3
     FROM generate_series(1, $1) AS n
     UNION ALL
     SELECT 'every-minute-' || (n % 4), now() - ($1 + n) * interval '1 minute', 10000000 + n * 10
     FROM generate_series(1, $2) AS n
     UNION ALL
     SELECT 'nightly', now() - n * interval '1 day', n * ($3 / 31)
     FROM generate_series(1, 30) AS n`,
    [rows / 10, rows / 100, rows],
  );
  await pool.query(
    `INSERT INTO ${s}.flows (id, node_count, created_at) OVERRIDING SYSTEM VALUE
     SELECT f, 10, now() - ($1 - f) * interval '100 ms' FROM generate_series(1, $1) AS f`,
    [flows],
  );
  await pool.query(
    `INSERT INTO ${s}.flow_nodes (job_id, flow_id, ref)
     SELECT $2 + (f - 1) * 10 + k + 1, f, 'step-' || k
     FROM generate_series(1, $1) AS f, generate_series(0, 9) AS k`,
    [flows, flowBase],
  );
  await pool.query(
    `INSERT INTO ${s}.job_dependencies (parent_id, child_id, flow_id, resolved)
     SELECT $2 + (f - 1) * 10 + k, $2 + (f - 1) * 10 + k + 1, f, f % 5 <> 0
     FROM generate_series(1, $1) AS f, generate_series(1, 9) AS k`,
    [flows, flowBase],
  );
  await pool.query(
    `VACUUM ANALYZE ${s}.jobs, ${s}.finished_jobs, ${s}.job_keys, ${s}.schedule_ticks, ${s}.flows,
       ${s}.flow_nodes, ${s}.job_dependencies`,
  );
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
  const cases = [
    ['newest jobs, no filter', {}],
    ['by id', { id: String(Math.floor(rows / 2)) }],
    ['by queue', { queue: 'q1' }],
    ['by status: pending', { status: 'pending' }],
    ['by queue and status: pending', { queue: 'q2', status: 'pending' }],
    ['by status: blocked', { status: 'blocked' }],
    ['by status: blocked, queue', { queue: 'q0', status: 'blocked' }],
    // Every ordering-keyed job is in q0 (n % 10 = 0): q1's blocked jobs are flow children only.
    ['by status: blocked, queue of flow children only', { queue: 'q1', status: 'blocked' }],
    ['by status: running', { status: 'running' }],
    ['by status: dead', { status: 'dead' }],
    ['by queue and status: cancelled', { queue: 'q3', status: 'cancelled' }],
    ['by status: succeeded, queue', { queue: 'q4', status: 'succeeded' }],
    ['by ordering key', { orderingKey: 'key-40' }],
    ['by idempotency key', { idempotencyKey: `order-${Math.floor(rows / 200) * 100 + 3}` }],
    ['by error code', { errorCode: 'E3' }],
    ['by schedule (27,500 ticks)', { schedule: 'every-minute-1' }],
    ['by schedule (30 ticks)', { schedule: 'nightly' }],
    ['by flow', { flow: String(Math.floor(flows / 2)) }],
    ['created in the last hour', { createdFrom: hourAgo }],
    ['finished in the last hour', { finishedFrom: hourAgo }],
  ];
  const { rows: counts } = await pool.query(
    `SELECT (SELECT count(*) FROM ${s}.schedule_ticks) AS ticks,
            (SELECT count(*) FROM ${s}.jobs WHERE status = 'pending' AND waiting_parents > 0) AS waiting,
            (SELECT count(*) FROM ${s}.jobs WHERE status = 'pending' AND awaits_predecessor) AS behind_key`,
  );
  console.log(`# Search plans: ${rows} jobs, ${rows / 10} succeeded, ${new Date().toISOString()}\n`);
  console.log(
    `${counts[0].ticks} schedule ticks, ${flows} flows, ${counts[0].waiting} flow children waiting, ` +
      `${counts[0].behind_key} jobs behind an ordering key\n`,
  );
  const { rows: version } = await pool.query('SHOW server_version');
  console.log(`PostgreSQL ${version[0].server_version}\n`);
  for (const [title, search] of cases) {
    const criteria = await searchCriteria(pool, schema, search);
    const statement = searchStatement(s, criteria, { kind: 'page', before: null, limit: 50 });
    const { rows: plan } = await pool.query({
      text: `EXPLAIN (ANALYZE, BUFFERS ON, COSTS OFF, TIMING OFF, SUMMARY ON) ${statement.text}`,
      values: statement.values,
    });
    console.log(`## ${title}\n\n\`\`\`\n${plan.map((r) => r['QUERY PLAN']).join('\n')}\n\`\`\`\n`);
  }
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`).catch(() => {});
  await pool.end();
  await lh.close();
  await server.stop();
}
