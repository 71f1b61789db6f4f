import { describe, expect, it } from 'vitest';
import { migratedClient, testPool } from './support/db.js';

interface PlanNode {
  'Node Type': string;
  'Actual Rows': number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}

describe('recovery sweep at scale', () => {
  it('a sweep over thousands of leases that the statistics still count as live looks each job up once', async () => {
    // One connection, so the statement the client prepares is the one EXPLAIN can execute.
    const lh = await migratedClient({ poolSize: 1, backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool();
    const jobs = 3000;
    await lh.enqueueMany(
      'swept',
      Array.from({ length: jobs }, (_, i) => ({ payload: i })),
    );
    for (let claimed = 0; claimed < jobs; ) {
      claimed += (await lh.claim({ queue: 'swept', owner: 'crashed', limit: 1000, leaseMs: 60_000 })).length;
    }
    // Statistics taken while every lease is live, as they are when a worker holding many dies.
    await pool.query(`ANALYZE "${lh.schema}".jobs`);
    expect(await lh.recoverExpired()).toEqual({ retried: 0, dead: 0 }); // prepares the statement
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET lease_expires_at = now() - interval '1 second' WHERE status = 'running'`,
    );

    const client = await lh.pool.connect();
    let nodes: PlanNode[];
    try {
      const { rows } = await client.query<{ name: string }>(
        `SELECT name FROM pg_prepared_statements WHERE name LIKE 'leasehold_recover_expired_leases_%'`,
      );
      expect(rows).toHaveLength(1);
      await client.query('BEGIN');
      const explained = await client.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${rows[0]?.name}(1000, 0, 0)`,
      );
      await client.query('ROLLBACK');
      nodes = planNodes(explained.rows[0]['QUERY PLAN'][0].Plan);
    } finally {
      client.release();
    }
    const update = nodes.find((node) => node['Node Type'] === 'ModifyTable' && node['Actual Rows'] === 1000);
    expect(update).toBeDefined(); // the batch really moved 1,000 expired leases
    // Rescanning the batch for every expired lease (the plan this guards against) discards about
    // jobs × 1,000 rows in a join filter; primary-key lookups discard none.
    const discarded = nodes.reduce((sum, node) => sum + (node['Rows Removed by Join Filter'] ?? 0), 0);
    expect(discarded).toBeLessThan(jobs);

    expect(await lh.recoverExpired()).toEqual({ retried: jobs, dead: 0 });
  });
});
