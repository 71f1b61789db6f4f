import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Leasehold, ValidationError } from '../../src/index.js';
import { migrate } from '../../src/migrations/migrator.js';
import { ClaimRouter } from '../../src/runtime/claim/claim-router.js';
import type { Queryable } from '../../src/storage/db.js';
import {
  JobClaimMany,
  JobClaimManyFair,
  JobClaimManyLimited,
  JobClaimManyLimitedFair,
} from '../../src/storage/leases/claim.js';
import { databaseUrl, dropSchema, migratedClient, testPool, uniqueSchema, waitFor } from '../support/db.js';
import { type PlanNode, planNodes } from '../support/plans.js';
import { roleClient } from '../support/roles.js';
import { started } from '../support/worker.js';

// Issue 34, fair turns between tenants: configureQueue(queue, { fairness: 'round-robin' }) and a
// fairnessKey per job. The claim takes jobs from distinct keys in turn, within the top priority.

/** Enqueues `count` jobs of `key` in bulk (enqueueMany, 10,000 a call). */
async function enqueueKeyed(
  lh: Leasehold,
  queue: string,
  key: string | undefined,
  count: number,
  priority = 0,
): Promise<string[]> {
  const ids: string[] = [];
  for (let done = 0; done < count; done += 10_000) {
    const n = Math.min(10_000, count - done);
    const batch = await lh.enqueueMany(
      queue,
      Array.from({ length: n }, (_, i) => ({ payload: { n: done + i }, fairnessKey: key, priority })),
    );
    ids.push(...batch.ids);
  }
  return ids;
}

/** The fairness keys (and priorities) of the jobs one claim took, in a stable order. */
async function claimKeys(lh: Leasehold, pool: pg.Pool, queue: string, limit: number): Promise<string[]> {
  const leases = await lh.claim({ queue, owner: 'fair-test', limit });
  const { rows } = await pool.query<{ k: string }>(
    `SELECT coalesce(fairness_key, '-') || priority AS k FROM ${lh.schema}.jobs
     WHERE id = ANY ($1::bigint[]) ORDER BY 1`,
    [leases.map((lease) => lease.jobId)],
  );
  return rows.map((row) => row.k);
}

/**
 * The rows of jobs one fair claim of `limit` reads, from its executed plan (EXPLAIN ANALYZE in a
 * transaction rolled back): per scan node of a jobs partition, rows returned and filtered out,
 * times its loops.
 */
async function jobRowsRead(pool: pg.Pool, schema: string, queue: string, limit: number): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const explained = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${JobClaimManyFair(schema).text}`, [
      queue,
      'explain',
      limit,
      30_000,
      '1',
    ]);
    await client.query('ROLLBACK');
    type Node = PlanNode & { 'Actual Loops'?: number };
    const nodes = planNodes(explained.rows[0]['QUERY PLAN'][0].Plan) as Node[];
    const scans = nodes.filter(
      (node) => node['Relation Name']?.startsWith('jobs') && node['Node Type'].includes('Scan'),
    );
    expect(scans.length).toBeGreaterThan(0);
    return scans.reduce(
      (sum, node) =>
        sum +
        ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) * (node['Actual Loops'] ?? 1),
      0,
    );
  } finally {
    client.release();
  }
}

describe('round-robin fairness', () => {
  it('ten jobs of key B enqueued after 100,000 of key A all start before A’s 50th job, with 4 concurrent workers; the claim never reads A’s backlog', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.configureQueue('tenants', { fairness: 'round-robin' });
    await enqueueKeyed(lh, 'tenants', 'A', 100_000);
    const b = await enqueueKeyed(lh, 'tenants', 'B', 10);
    // Spread A over the three hot lanes and keep B in one: a lane holding none of B's jobs once
    // tempted the planner to walk all of that lane's A jobs looking for B's.
    await pool.query(
      `UPDATE ${lh.schema}.jobs SET lane = CASE WHEN id = ANY ($1::bigint[]) THEN 2 ELSE 1 + id % 3 END
       WHERE queue_name = 'tenants'`,
      [b],
    );
    await pool.query(`ANALYZE ${lh.schema}.jobs`);
    // The claim reads a few rows per key, never A's backlog: every scan of jobs in the executed plan
    // (rows returned plus rows filtered out, over all its loops) adds up to a few dozen.
    expect(await jobRowsRead(pool, lh.schema, 'tenants', 10)).toBeLessThan(200);
    // Nor does its estimate grow with the backlog past jit_above_cost's default (100,000): compiled,
    // a 2 ms claim took 250 ms.
    const estimated = await pool.query(`EXPLAIN (FORMAT JSON) ${JobClaimManyFair(lh.schema).text}`, [
      'tenants',
      'explain',
      500,
      30_000,
      '1',
    ]);
    expect(estimated.rows[0]['QUERY PLAN'][0].Plan['Total Cost']).toBeLessThan(100_000);
    // Handler starts, in order, across the four workers (one process: one list). Claims of up to
    // four into two slots: half of each claim waits in the worker's buffer, in the claim's order.
    const startedIds: string[] = [];
    const queues = {
      tenants: {
        handler: async (job: { id: string }) => {
          startedIds.push(job.id);
        },
        concurrency: 2,
        prefetch: 2,
      },
    };
    const workers = await Promise.all(
      [1, 2, 3, 4].map(() =>
        started(lh.worker({ queues, claimBatchSize: 4, recoveryIntervalMs: 0, agingPassIntervalMs: 0 })),
      ),
    );
    const finishedB = async () =>
      Number(
        (
          await pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM ${lh.schema}.finished_jobs WHERE id = ANY ($1::bigint[])`,
            [b],
          )
        ).rows[0]?.n,
      );
    await waitFor(async () => (await finishedB()) === 10, { timeoutMs: 60_000, what: "B's ten jobs" });
    await Promise.all(workers.map((worker) => worker.stop()));
    // Claim order: claimed_at is each claim statement's start; jobs of one claim share it, and
    // within a claim the keys alternate. For each B job, the A jobs claimed by earlier statements.
    const { rows } = await pool.query<{ ahead: string }>(
      `SELECT (SELECT count(*) FROM ${lh.schema}.finished_jobs AS a
               WHERE a.queue_name = 'tenants' AND a.id <> ALL ($1::bigint[]) AND a.claimed_at < b.claimed_at) AS ahead
       FROM ${lh.schema}.finished_jobs AS b
       WHERE b.id = ANY ($1::bigint[])`,
      [b],
    );
    expect(rows).toHaveLength(10);
    for (const row of rows) expect(Number(row.ahead)).toBeLessThan(49);
    // And in the order handlers started: every B job before A's 50th.
    const bIds = new Set(b);
    const lastB = Math.max(...b.map((id) => startedIds.indexOf(id)));
    expect(startedIds.slice(0, lastB).filter((id) => !bIds.has(id)).length).toBeLessThan(49);
  }, 180_000);

  it('takes turns key after key, and the next claim starts with the key after the last one served', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.configureQueue('turns', { fairness: 'round-robin' });
    for (const key of ['A', 'B', 'C']) await enqueueKeyed(lh, 'turns', key, 5);
    const order: string[] = [];
    for (let i = 0; i < 7; i++) order.push(...(await claimKeys(lh, pool, 'turns', 1)));
    expect(order).toEqual(['A0', 'B0', 'C0', 'A0', 'B0', 'C0', 'A0']);
    // A claim of four over three keys: two of the next key (B), one of each other.
    expect(await claimKeys(lh, pool, 'turns', 4)).toEqual(['A0', 'B0', 'B0', 'C0']);
  });

  it('returns a claim’s jobs in turn order, which the worker starts them in', async () => {
    const lh = await migratedClient();
    await lh.configureQueue('in-turn', { fairness: 'round-robin' });
    await enqueueKeyed(lh, 'in-turn', 'A', 5);
    await enqueueKeyed(lh, 'in-turn', 'B', 5);
    const leases = await lh.claim({ queue: 'in-turn', owner: 'o', limit: 4 });
    const { rows } = await testPool(1).query<{ id: string; k: string }>(
      `SELECT id::text, fairness_key AS k FROM ${lh.schema}.jobs WHERE id = ANY ($1::bigint[])`,
      [leases.map((lease) => lease.jobId)],
    );
    const keyOf = new Map(rows.map((row) => [row.id, row.k]));
    // Preference order would be A, A, B, B (A's jobs are older).
    expect(leases.map((lease) => keyOf.get(lease.jobId))).toEqual(['A', 'B', 'A', 'B']);
  });

  it('passes over keys whose jobs are not due yet (a retry backing off), and moves the turn on', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.configureQueue('backoff', { fairness: 'round-robin' });
    // Keys A to C have only jobs due in an hour; D has work now.
    for (const key of ['A', 'B', 'C'])
      await lh.enqueue('backoff', {}, { fairnessKey: key, delayMs: 3_600_000 });
    await enqueueKeyed(lh, 'backoff', 'D', 3);
    expect(await claimKeys(lh, pool, 'backoff', 1)).toEqual(['D0']);
    expect(await claimKeys(lh, pool, 'backoff', 2)).toEqual(['D0', 'D0']);
  });

  it('is fair within a priority: higher priorities first, keys in turn inside each', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.configureQueue('ranked', { fairness: 'round-robin' });
    await enqueueKeyed(lh, 'ranked', 'A', 20, 0);
    await enqueueKeyed(lh, 'ranked', 'B', 20, 0);
    await enqueueKeyed(lh, 'ranked', 'A', 6, 5);
    await enqueueKeyed(lh, 'ranked', 'B', 2, 5);
    expect(await claimKeys(lh, pool, 'ranked', 4)).toEqual(['A5', 'A5', 'B5', 'B5']);
    // B has no priority-5 job left: A's remaining ones, alone at the top.
    expect(await claimKeys(lh, pool, 'ranked', 4)).toEqual(['A5', 'A5', 'A5', 'A5']);
    expect(await claimKeys(lh, pool, 'ranked', 6)).toEqual(['A0', 'A0', 'A0', 'B0', 'B0', 'B0']);
  });

  it('a job without a fairness key is claimed from the front of the queue, in a turn of its own', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.configureQueue('mixed', { fairness: 'round-robin' });
    await enqueueKeyed(lh, 'mixed', undefined, 2);
    await enqueueKeyed(lh, 'mixed', 'A', 10);
    expect(await claimKeys(lh, pool, 'mixed', 4)).toEqual(['-0', '-0', 'A0', 'A0']);
  });

  it('respects ordering keys: a job waiting behind its key’s head is not claimed', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.configureQueue('ordered-fair', { fairness: 'round-robin' });
    await lh.enqueueMany(
      'ordered-fair',
      [1, 2, 3].map((n) => ({ payload: { n }, orderingKey: 'o', fairnessKey: 'A' })),
    );
    await enqueueKeyed(lh, 'ordered-fair', 'B', 3);
    expect(await claimKeys(lh, pool, 'ordered-fair', 6)).toEqual(['A0', 'B0', 'B0', 'B0']);
  });

  it('composes with a per-key concurrency limit: turns between fairness keys, within each concurrency key’s slots', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    expect(
      await lh.configureQueue('fair-limited', { fairness: 'round-robin', concurrencyLimitPerKey: 1 }),
    ).toMatchObject({ fairness: 'round-robin', concurrencyLimitPerKey: 1 });
    // A's jobs all count against one concurrency key; B's each against a key of its own.
    await lh.enqueueMany(
      'fair-limited',
      Array.from({ length: 20 }, (_, n) => ({ payload: { n }, fairnessKey: 'A', concurrencyKey: 'shared' })),
    );
    await lh.enqueueMany(
      'fair-limited',
      Array.from({ length: 3 }, (_, n) => ({ payload: { n }, fairnessKey: 'B', concurrencyKey: `b${n}` })),
    );
    expect(await claimKeys(lh, pool, 'fair-limited', 4)).toEqual(['A0', 'B0', 'B0', 'B0']);
    // 'shared' is at its limit and B has nothing left: nothing more until A's running job ends.
    expect(await claimKeys(lh, pool, 'fair-limited', 4)).toEqual([]);
    const { rows } = await pool.query<{ running: number }>(
      `SELECT running FROM ${lh.schema}.concurrency_keys WHERE queue_name = 'fair-limited' AND concurrency_key = 'shared'`,
    );
    expect(rows[0]?.running).toBe(1);
  });

  it('a queue without fairness keeps the plain claim statement and preference order; null turns fairness off', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await enqueueKeyed(lh, 'plain', 'A', 5);
    await enqueueKeyed(lh, 'plain', 'B', 2);
    const sent: string[] = [];
    const recording: Queryable = {
      query: ((config: { name?: string }, values?: unknown[]) => {
        if (config.name) sent.push(config.name);
        return pool.query(config as pg.QueryConfig, values);
      }) as Queryable['query'],
    };
    const router = new ClaimRouter(recording, lh.schema, null);
    const claim = () => router.claim({ queue: 'plain', owner: 'o', limit: 3, leaseMs: 30_000 });
    const first = await claim();
    expect(sent.filter((name) => name.includes('claim_jobs'))).toEqual([JobClaimMany(lh.schema).name]);
    const keys = await pool.query<{ k: string }>(
      `SELECT fairness_key AS k FROM ${lh.schema}.jobs WHERE id = ANY ($1::bigint[]) ORDER BY id`,
      [first.map((row) => row.id)],
    );
    expect(keys.rows.map((row) => row.k)).toEqual(['A', 'A', 'A']);

    await lh.configureQueue('plain', { fairness: 'round-robin' });
    router.forget('plain');
    sent.length = 0;
    await claim();
    expect(sent.filter((name) => name.includes('claim_jobs'))).toEqual([JobClaimManyFair(lh.schema).name]);

    expect(await lh.configureQueue('plain', { fairness: null })).toMatchObject({ fairness: null });
    router.forget('plain');
    sent.length = 0;
    await claim();
    expect(sent.filter((name) => name.includes('claim_jobs'))).toEqual([JobClaimMany(lh.schema).name]);
    expect(JobClaimMany(lh.schema).text).not.toContain('fair');

    // A per-key limit without fairness keeps the limited claim; with fairness, its fair variant.
    await lh.configureQueue('plain', { concurrencyLimitPerKey: 5 });
    router.forget('plain');
    sent.length = 0;
    await claim();
    expect(sent.filter((name) => name.includes('claim_jobs'))).toEqual([JobClaimManyLimited(lh.schema).name]);
    expect(JobClaimManyLimited(lh.schema).text).not.toContain('fair');
    await lh.configureQueue('plain', { fairness: 'round-robin' });
    router.forget('plain');
    sent.length = 0;
    await claim();
    expect(sent.filter((name) => name.includes('claim_jobs'))).toEqual([
      JobClaimManyLimitedFair(lh.schema).name,
    ]);
  });

  it('a worker whose cached settings still say fair gets nothing from the fair claim once fairness is off, and claims plainly', async () => {
    const lh = await migratedClient();
    await lh.configureQueue('switched', { fairness: 'round-robin' });
    await enqueueKeyed(lh, 'switched', 'A', 3);
    const router = new ClaimRouter(testPool(2), lh.schema, null);
    expect(await router.claim({ queue: 'switched', owner: 'o', limit: 1, leaseMs: 30_000 })).toHaveLength(1);
    await lh.configureQueue('switched', { fairness: null });
    // The router's cache says fair: the fair statement yields nothing, the router re-reads.
    expect(await router.claim({ queue: 'switched', owner: 'o', limit: 2, leaseMs: 30_000 })).toHaveLength(2);
  });

  it('refuses bad fairness settings and keys with a ValidationError, writing nothing', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    for (const fairness of ['none', 'fifo', true, 1, '']) {
      await expect(lh.configureQueue('bad', { fairness } as never)).rejects.toBeInstanceOf(ValidationError);
    }
    await lh.configureQueue('bad', { concurrencyLimit: 2 });
    await expect(lh.configureQueue('bad', { fairness: 'round-robin' })).rejects.toThrow(
      /fairness cannot be combined/,
    );
    expect(await lh.configureQueue('bad', {})).toMatchObject({ fairness: null, concurrencyLimit: 2 });
    for (const fairnessKey of ['', 'x'.repeat(201), 5, null]) {
      await expect(lh.enqueue('bad', {}, { fairnessKey } as never)).rejects.toBeInstanceOf(ValidationError);
      await expect(
        lh.enqueueMany('bad', [{ payload: 1, fairnessKey: 'ok' }, { payload: 2, fairnessKey } as never]),
      ).rejects.toBeInstanceOf(ValidationError);
    }
    await expect(
      lh.enqueue('bad', {}, { fairnessKey: 'A', dedupe: { key: 'd', mode: 'replace' } }),
    ).rejects.toBeInstanceOf(ValidationError);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${lh.schema}.jobs`);
    expect(rows[0].n).toBe(0);
    // The bound holds in the table too (a producer calling the insert function directly).
    await expect(
      pool.query(`INSERT INTO ${lh.schema}.jobs (queue_name, payload, fairness_key) VALUES ('bad', '1', '')`),
    ).rejects.toThrow(/check constraint/);
  });

  it('the producer and worker roles enqueue with keys and claim in turns through their functions', async () => {
    const owner = await migratedClient();
    const producer = await roleClient(owner.schema, 'producer');
    const workerRole = await roleClient(owner.schema, 'worker');
    await owner.configureQueue('roles-fair', { fairness: 'round-robin' });
    await producer.enqueueMany(
      'roles-fair',
      [1, 2, 3].map((n) => ({ payload: { n }, fairnessKey: 'A' })),
    );
    await producer.enqueue('roles-fair', { n: 4 }, { fairnessKey: 'B' });
    const first = await workerRole.claim({ queue: 'roles-fair', owner: 'role-worker', limit: 2 });
    const second = await workerRole.claim({ queue: 'roles-fair', owner: 'role-worker', limit: 1 });
    expect(first.map((lease) => lease.payload)).toEqual([{ n: 1 }, { n: 4 }]);
    expect(second.map((lease) => lease.payload)).toEqual([{ n: 2 }]);
    // With a per-key limit as well (the limited fair claim's function).
    await owner.configureQueue('roles-fair-limited', { fairness: 'round-robin', concurrencyLimitPerKey: 1 });
    await producer.enqueueMany('roles-fair-limited', [
      { payload: { n: 1 }, fairnessKey: 'A', concurrencyKey: 'k' },
      { payload: { n: 2 }, fairnessKey: 'A', concurrencyKey: 'k' },
      { payload: { n: 3 }, fairnessKey: 'B', concurrencyKey: 'j' },
    ]);
    const limited = await workerRole.claim({ queue: 'roles-fair-limited', owner: 'role-worker', limit: 3 });
    expect(limited.map((lease) => lease.payload)).toEqual([{ n: 1 }, { n: 3 }]);
  });

  it('forgetting a drained round-robin queue removes its cursor with its settings', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    await lh.configureQueue('forgotten', { fairness: 'round-robin' });
    const turns = async () =>
      (
        await pool.query(
          `SELECT count(*)::int AS n FROM ${lh.schema}.fair_turns WHERE queue_name = 'forgotten'`,
        )
      ).rows[0].n;
    expect(await turns()).toBe(1);
    expect(await lh.forgetQueue('forgotten')).toBe(true);
    expect(await turns()).toBe(0);
  });

  it('a process of this version enqueues and claims on a schema not yet at 022 (a rolling upgrade)', async () => {
    const schema = uniqueSchema('lh_before_fair');
    const pool = testPool(2);
    await migrate(pool, schema, { upTo: 21 });
    const lh = new Leasehold({ connectionString: databaseUrl(), schema, poolSize: 2 });
    try {
      const { id } = await lh.enqueue('before', { n: 1 });
      const [lease] = await lh.claim({ queue: 'before', owner: 'o' });
      expect(lease?.jobId).toBe(id);
      expect(await lh.complete(lease as NonNullable<typeof lease>)).toBe(true);
      // A key needs the column 022 adds.
      await expect(lh.enqueue('before', {}, { fairnessKey: 'A' })).rejects.toThrow(/fairness_key/);
    } finally {
      await lh.close();
      await dropSchema(schema);
    }
  });

  it('stores the key with every enqueue path: one, many, idempotent, ordered', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const ids = [
      (await lh.enqueue('paths', {}, { fairnessKey: 'one' })).id,
      ...(await lh.enqueueMany('paths', [{ payload: 1, fairnessKey: 'many' }])).ids,
      (await lh.enqueue('paths', {}, { fairnessKey: 'keyed', idempotencyKey: 'k' })).id,
      (await lh.enqueue('paths', {}, { fairnessKey: 'ordered', orderingKey: 'o' })).id,
    ];
    const { rows } = await pool.query<{ fairness_key: string }>(
      `SELECT fairness_key FROM ${lh.schema}.jobs WHERE id = ANY ($1::bigint[]) ORDER BY id`,
      [ids],
    );
    expect(rows.map((row) => row.fairness_key)).toEqual(['one', 'many', 'keyed', 'ordered']);
  });
});
