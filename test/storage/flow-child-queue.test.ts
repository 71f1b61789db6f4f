import { afterAll, describe, expect, it } from 'vitest';
import { Leasehold } from '../../src/index.js';
import { loadMigrations, migrate } from '../../src/migrations/migrator.js';
import { databaseUrl, dropSchema, migratedClient, testPool, uniqueSchema } from '../support/db.js';

// Migration 019: each flow edge records its child's queue, and a parent's completion finds each
// child by (queue, id) (docs/scaling.md, "Flow release"). These pin what that must not change:
// children in other queues than their parent's are released, an edge written without a queue (an
// older version, mid-upgrade) still releases its child, and the migration fills in the edges of
// flows already waiting.

const pool = testPool(2);
const schemas: string[] = [];
afterAll(async () => {
  for (const schema of schemas) await dropSchema(schema);
});

const edgesOf = async (schema: string) =>
  (
    await pool.query(
      `SELECT child_id::text, child_queue, resolved FROM "${schema}".job_dependencies ORDER BY child_id`,
    )
  ).rows;

describe('flow edges carry their child queue (019)', () => {
  it('releases children in other queues, and a child whose edge has no queue', async () => {
    const lh = await migratedClient();
    const { ids } = await lh.enqueueFlow([
      { ref: 'parent', queue: 'fcq-a', payload: {} },
      { ref: 'same', queue: 'fcq-a', payload: {}, dependsOn: ['parent'] },
      { ref: 'other', queue: 'fcq-b', payload: {}, dependsOn: ['parent'] },
      { ref: 'legacy', queue: 'fcq-c', payload: {}, dependsOn: ['parent'] },
    ]);
    expect(await edgesOf(lh.schema)).toEqual([
      { child_id: ids.same, child_queue: 'fcq-a', resolved: false },
      { child_id: ids.other, child_queue: 'fcq-b', resolved: false },
      { child_id: ids.legacy, child_queue: 'fcq-c', resolved: false },
    ]);
    // As an older version's enqueueFlow writes it during a rolling upgrade.
    await pool.query(`UPDATE "${lh.schema}".job_dependencies SET child_queue = NULL WHERE child_id = $1`, [
      ids.legacy,
    ]);
    const [parent] = await lh.claim({ queue: 'fcq-a', owner: 'w', limit: 10 });
    expect(parent?.jobId).toBe(ids.parent);
    await lh.complete(parent as NonNullable<typeof parent>);

    const claimed = await Promise.all(
      ['fcq-a', 'fcq-b', 'fcq-c'].map(async (queue) =>
        (await lh.claim({ queue, owner: 'w', limit: 10 })).map((lease) => lease.jobId),
      ),
    );
    expect(claimed).toEqual([[ids.same], [ids.other], [ids.legacy]]);
    expect((await edgesOf(lh.schema)).every((edge) => edge.resolved)).toBe(true);
  });

  it('fills in the queue of every unresolved edge of a flow enqueued before it', async () => {
    const schema = uniqueSchema('lh_fcq_mig');
    schemas.push(schema);
    await migrate(pool, schema, { upTo: 18 });
    const s = `"${schema}"`;
    // A flow as 014 to 018 stored it: parent (queue p) -> waiting child (queue c), and a resolved
    // edge to a child already released (queue r).
    const job = async (queue: string, waiting: number, hasChildren: boolean) =>
      (
        await pool.query(
          `INSERT INTO ${s}.jobs (queue_name, payload, waiting_parents, has_children)
           VALUES ($1, '{}', $2, $3) RETURNING id::text`,
          [queue, waiting, hasChildren],
        )
      ).rows[0].id as string;
    const parent = await job('fcq-p', 0, true);
    const waiting = await job('fcq-c', 1, false);
    const released = await job('fcq-r', 0, false);
    const flow = (await pool.query(`INSERT INTO ${s}.flows (node_count) VALUES (3) RETURNING id`)).rows[0].id;
    await pool.query(
      `INSERT INTO ${s}.flow_nodes (job_id, flow_id, ref) VALUES ($1, $4, 'p'), ($2, $4, 'c'), ($3, $4, 'r')`,
      [parent, waiting, released, flow],
    );
    await pool.query(
      `INSERT INTO ${s}.job_dependencies (parent_id, child_id, flow_id, resolved)
       VALUES ($1, $2, $4, false), ($1, $3, $4, true)`,
      [parent, waiting, released, flow],
    );

    // 019 and every later migration (each keeps these edges as they are).
    expect((await migrate(pool, schema)).applied).toEqual(
      loadMigrations()
        .map((m) => m.version)
        .filter((v) => v >= 19),
    );
    expect(await edgesOf(schema)).toEqual(
      [
        { child_id: waiting, child_queue: 'fcq-c', resolved: false },
        { child_id: released, child_queue: null, resolved: true },
      ].sort((a, b) => Number(BigInt(a.child_id) - BigInt(b.child_id))),
    );

    // The backfilled edge releases its child through the routed completion.
    const lh = new Leasehold({ connectionString: databaseUrl(), schema });
    try {
      const [lease] = await lh.claim({ queue: 'fcq-p', owner: 'w' });
      expect(lease?.jobId).toBe(parent);
      await lh.complete(lease as NonNullable<typeof lease>);
      const [child] = await lh.claim({ queue: 'fcq-c', owner: 'w' });
      expect(child?.jobId).toBe(waiting);
    } finally {
      await lh.close();
    }
  });
});
