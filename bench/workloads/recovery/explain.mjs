// EXPLAIN (ANALYZE, BUFFERS) of the library's own recovery statement over N expired leases, as
// prepared on the client's only connection: once with the sweep's batch of 1,000 and once over all
// N in one statement, each in a transaction rolled back so both see the same N expired rows. The
// table is analyzed while every lease is still live and not after they lapse, as after a real
// crash: the planner then expects (almost) no expired lease.
import { Leasehold } from '../../../dist/index.js';

const SCHEMA = 'bench_recovery_explain';

export async function explainRecovery({ connectionString, admin, jobs }) {
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  const lh = new Leasehold({ connectionString, schema: SCHEMA, poolSize: 1 });
  try {
    await lh.migrate();
    for (let done = 0; done < jobs; done += 5000) {
      await lh.enqueueMany(
        'explain',
        Array.from({ length: Math.min(5000, jobs - done) }, () => ({ payload: {} })),
      );
    }
    for (let claimed = 0; claimed < jobs; ) {
      const leases = await lh.claim({ queue: 'explain', owner: 'explain', limit: 1000, leaseMs: 60_000 });
      if (leases.length === 0) break;
      claimed += leases.length;
    }
    await admin.query(`VACUUM (ANALYZE) ${SCHEMA}.jobs`);
    await lh.recoverExpired(); // nothing has expired yet: this only prepares the statement
    await admin.query(
      `UPDATE ${SCHEMA}.jobs SET lease_expires_at = now() - interval '1 second' WHERE status = 'running'`,
    );
    const { rows } = await lh.pool.query(
      `SELECT name FROM pg_prepared_statements WHERE name LIKE 'leasehold_recover_expired_leases_%'`,
    );
    if (!rows[0]) throw new Error('the recovery statement was not prepared on this connection');
    const plans = {};
    for (const limit of [1000, jobs]) {
      const client = await lh.pool.connect();
      try {
        await client.query('BEGIN');
        const plan = await client.query(
          `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE ${rows[0].name}(${limit}, 0, 0, '${SCHEMA}_wakeup')`,
        );
        await client.query('ROLLBACK');
        plans[limit] = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
      } finally {
        client.release();
      }
    }
    return plans;
  } finally {
    await lh.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  }
}
