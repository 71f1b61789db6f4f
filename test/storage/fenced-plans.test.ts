import { describe, expect, it } from 'vitest';
import { completeJobs } from '../../src/storage/leases/complete.js';
import { extendLeases } from '../../src/storage/leases/heartbeat.js';
import { directDatabaseUrl, migratedClient, testPool } from '../support/db.js';
import { type PlanNode, planNodes } from '../support/plans.js';

const bigints = (values: readonly string[]) => {
  for (const value of values) expect(value).toMatch(/^-?\d+$/);
  return `ARRAY[${values.join(',')}]::bigint[]`;
};

describe('fenced batch writes at scale', () => {
  it('a batch of 500 completions looks each job up once, even with statistics that count no running job', async () => {
    // One direct connection with prepared statements (even when the suite runs behind a pooler),
    // so the statement the client prepares is the one EXPLAIN can execute.
    const lh = await migratedClient({
      connectionString: directDatabaseUrl(),
      preparedStatements: true,
      poolSize: 1,
    });
    const pool = testPool();
    const jobs = 5000;
    for (let i = 0; i < jobs; i += 1000) {
      await lh.enqueueMany(
        'fenced',
        Array.from({ length: 1000 }, (_, n) => ({ payload: i + n })),
      );
    }
    // Statistics taken while every job is pending, as they are after a burst of enqueues.
    await pool.query(`ANALYZE "${lh.schema}".jobs`);
    const warmUp = await lh.claim({ queue: 'fenced', owner: 'plan-check', limit: 1 });
    expect(await lh.completeMany(warmUp)).toEqual(new Set([warmUp[0]?.jobId])); // prepares the statement
    const leases = await lh.claim({ queue: 'fenced', owner: 'plan-check', limit: 500 });
    expect(leases).toHaveLength(500);

    const client = await lh.pool.connect();
    let nodes: PlanNode[];
    try {
      const { rows } = await client.query<{ name: string }>(
        `SELECT name FROM pg_prepared_statements WHERE name LIKE 'leasehold_complete_jobs_%'`,
      );
      expect(rows).toHaveLength(1);
      const args = [
        bigints(leases.map((l) => l.jobId)),
        bigints(leases.map((l) => l.token)),
        bigints(leases.map((l) => l.claimId)),
        `array_fill('plan-check'::text, ARRAY[500])`,
        `array_fill('fenced'::text, ARRAY[500])`,
        `'${lh.schema}_wakeup'`,
        `'${lh.schema}_finished'`,
        `'fenced'`, // the batch's one queue
      ];
      await client.query('BEGIN');
      const explained = await client.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${rows[0]?.name}(${args.join(', ')})`,
      );
      await client.query('ROLLBACK');
      nodes = planNodes(explained.rows[0]['QUERY PLAN'][0].Plan);
    } finally {
      client.release();
    }
    // The batch really completed 500 leases (deleted from jobs, one delete per lane).
    const deleted = nodes
      .filter((node) => node.Operation === 'Delete' && node['Relation Name'] === 'jobs')
      .reduce((sum, node) => sum + (node['Actual Rows'] ?? 0), 0);
    expect(deleted).toBe(500);
    // Joining the batch to a scan of jobs (the plans this guards against) discards about
    // 500 × 500 rows in a join filter, or thousands of pending jobs in a filter on jobs; one
    // primary-key probe per lease discards none.
    const discarded = nodes.reduce(
      (sum, node) =>
        sum +
        (node['Rows Removed by Join Filter'] ?? 0) +
        (/^jobs(_lane_\d)?$/.test(node['Relation Name'] ?? '') ? (node['Rows Removed by Filter'] ?? 0) : 0),
      0,
    );
    expect(discarded).toBeLessThan(500);

    expect(await lh.completeMany(leases)).toEqual(new Set(leases.map((l) => l.jobId)));
  });

  it('a heartbeat and a completion of the same leases, sent in opposite orders at once, never deadlock', async () => {
    // Each fenced statement locks its rows as it probes them: in input order, they would take the
    // same rows in opposite orders and PostgreSQL would abort one of them (40P01).
    const lh = await migratedClient({ poolSize: 4 });
    for (let round = 0; round < 5; round++) {
      const queue = `both-ways-${round}`;
      await lh.enqueueMany(
        queue,
        Array.from({ length: 300 }, (_, i) => ({ payload: i })),
      );
      const leases = await lh.claim({ queue, owner: 'two-writers', limit: 300, leaseMs: 60_000 });
      expect(leases).toHaveLength(300);
      const refs = leases.map((l) => ({
        jobId: l.jobId,
        token: l.token,
        claimId: l.claimId,
        owner: l.owner,
        queue: l.queue,
        leaseMs: 60_000,
      }));
      const [extended, completed] = await Promise.all([
        extendLeases(lh.pool, lh.schema, refs),
        completeJobs(lh.pool, lh.schema, [...refs].reverse()),
      ]);
      // Whichever went first, every job was completed, and the heartbeat only touched rows
      // still running when it took them.
      expect(completed.size).toBe(300);
      expect(extended.size === 0 || extended.size === 300).toBe(true);
    }
  });
});
