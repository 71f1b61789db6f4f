import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  countByStatus,
  directDatabaseUrl,
  expireLease,
  listenOptions,
  migratedClient,
  testPool,
  waitFor,
} from '../support/db.js';
import { expireLeases } from '../support/job-states.js';
import { type PlanNode, planNodes } from '../support/plans.js';
import { started } from '../support/worker.js';

describe('recovery sweep at scale', () => {
  it('a sweep over thousands of leases that the statistics still count as live looks each job up once', async () => {
    // One direct connection with prepared statements (even when the suite runs behind a pooler),
    // so the statement the client prepares is the one EXPLAIN can execute.
    const lh = await migratedClient({
      connectionString: directDatabaseUrl(),
      preparedStatements: true,
      poolSize: 1,
      backoff: { baseMs: 0, maxMs: 0 },
    });
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
    await expireLeases(pool, lh.schema);

    const client = await lh.pool.connect();
    let nodes: PlanNode[];
    try {
      const { rows } = await client.query<{ name: string }>(
        `SELECT name FROM pg_prepared_statements WHERE name LIKE 'leasehold_recover_expired_leases_%'`,
      );
      expect(rows).toHaveLength(1);
      await client.query('BEGIN');
      const explained = await client.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${rows[0]?.name}(1000, 0, 0, '${lh.schema}_wakeup', '${lh.schema}_finished')`,
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

describe('recovery sweep wake-ups', () => {
  it('the sweep wakes an idle listening worker that never polls and never sweeps itself', async () => {
    const lh = await migratedClient({ ...listenOptions(), backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool();
    await lh.enqueue('orphaned', { n: 1 });
    const [lost] = await lh.claim({ queue: 'orphaned', owner: 'crashed', leaseMs: 60_000 });
    const worker = lh.worker({
      queues: { orphaned: { concurrency: 4, handler: async () => {} } },
      pollIntervalMs: 3_600_000,
      recoveryIntervalMs: 0,
    });
    await started(worker);
    await waitFor(() => worker.listenerPid !== null, { what: 'the listener' });
    // One job run through a notification, so the worker's start-up claims are over and it is idle.
    await lh.enqueue('orphaned', { n: 2 });
    await waitFor(() => worker.counters.completed === 1, { what: 'the first job completed' });

    await expireLease(pool, lh.schema, lost?.jobId as string);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    // Its next poll is an hour away: only the sweep's notification can start the job now. The
    // worker counts a completion once its statement has answered, a moment after the commit the
    // table shows: both are waited for (CI saw the table first).
    await waitFor(
      async () => (await countByStatus(pool, lh.schema)).succeeded === 2 && worker.counters.completed === 2,
      { timeoutMs: 5000, what: 'the recovered job to run' },
    );
    expect(worker.counters.completed).toBe(2);
  });

  it('a sweep notifies each queue it returned jobs to once, and none for jobs that died', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool();
    const channel = `${lh.schema}_wakeup`;
    // enqueueMany notifies in its own statement: no trailing wake-up can arrive later.
    await lh.enqueueMany('alpha', [{ payload: 1 }, { payload: 2 }]);
    await lh.enqueueMany('beta', [{ payload: 3 }]);
    await lh.enqueueMany('gamma', [{ payload: 4, maxAttempts: 1 }]);
    for (const queue of ['alpha', 'beta', 'gamma']) {
      await lh.claim({ queue, owner: 'crashed', limit: 10, leaseMs: 60_000 });
    }
    await expireLeases(pool, lh.schema);
    const listener = new pg.Client({ connectionString: directDatabaseUrl() }); // LISTEN needs a session
    await listener.connect();
    try {
      const received: string[] = [];
      listener.on('notification', (message) => received.push(message.payload ?? ''));
      await listener.query(`LISTEN "${channel}"`);
      expect(await lh.recoverExpired()).toEqual({ retried: 3, dead: 1 });
      expect(await lh.recoverExpired()).toEqual({ retried: 0, dead: 0 });
      // Notifications arrive in commit order: once this one is here, the sweeps' have arrived too.
      await pool.query('SELECT pg_notify($1, $2)', [channel, 'after-the-sweeps']);
      await waitFor(() => received.includes('after-the-sweeps'), { what: 'the closing notification' });
      expect(received.slice(0, -1).sort()).toEqual(['alpha', 'beta']);
    } finally {
      await listener.end();
    }
  });
});
