import { describe, expect, it } from 'vitest';
import { ClaimRouter } from '../../src/runtime/claim/claim-router.js';
import { QueueRunner } from '../../src/runtime/claim/queue-runner.js';
import { resolveWorkerOptions } from '../../src/runtime/options.js';
import type { ClaimedRow } from '../../src/storage/leases/claim.js';
import { migratedClient, testPool } from '../support/db.js';

// A job that became claimable "late" (here: its available_at moved an hour back, as a long
// transaction's enqueue or an aged job would look) lies below the floor the worker's claims start at.
async function backlogWithStraggler(queue: string) {
  const lh = await migratedClient();
  const pool = testPool(2);
  await lh.enqueueMany(
    queue,
    Array.from({ length: 60 }, (_, i) => ({ payload: { i } })),
  );
  return { lh, pool };
}

async function addStraggler(
  pool: Pick<ReturnType<typeof testPool>, 'query'>,
  schema: string,
  queue: string,
): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO "${schema}".jobs (queue_name, payload, available_at)
     VALUES ($1, '{"straggler":true}', now() - interval '1 hour') RETURNING id::text`,
    [queue],
  );
  return rows[0]!.id;
}

describe('claims starting at a floor on available_at', () => {
  it('a claim from a floor skips what lies below it while full batches remain; after a short one, the next claim starts at the front', async () => {
    const { lh, pool } = await backlogWithStraggler('floor');
    const router = new ClaimRouter(lh.pool, lh.schema, { lagMs: 1000, fullScanEveryMs: 3_600_000 });
    const params = { queue: 'floor', owner: 'w', limit: 20, leaseMs: 60_000 };

    const first = await router.claim(params); // from the front: sets the floor
    expect(first).toHaveLength(20);
    expect(router.frontClaimDue('floor')).toBe(false);
    const straggler = await addStraggler(pool, lh.schema, 'floor');

    const second = await router.claim(params); // from the floor: a full batch above it
    expect(second).toHaveLength(20);
    expect(second.map((row) => row.id)).not.toContain(straggler);
    expect(router.frontClaimDue('floor')).toBe(false);

    // 20 jobs left above the floor: a claim of 25 comes back short with them at once (one
    // statement), and says the next claim is due from the front.
    const third = await router.claim({ ...params, limit: 25 });
    expect(third).toHaveLength(20);
    expect(third.map((row) => row.id)).not.toContain(straggler);
    expect(router.frontClaimDue('floor')).toBe(true);

    // That claim starts at the front and finds the straggler; after it, floors apply again.
    const fourth = await router.claim(params);
    expect(fourth.map((row) => row.id)).toEqual([straggler]);
    expect(router.frontClaimDue('floor')).toBe(false);
  });

  it('a worker follows a short floored claim with a claim from the front at once, without waiting for a wake-up', async () => {
    const { lh, pool } = await backlogWithStraggler('floor-runner');
    // The worker's claim loop with the worker's claim router, on the real tables; handlers are
    // only counted as started, so every slot they take stays taken.
    const router = new ClaimRouter(lh.pool, lh.schema, { lagMs: 1000, fullScanEveryMs: 3_600_000 });
    const [config] = resolveWorkerOptions({
      queues: { 'floor-runner': { concurrency: 100, handler: async () => {} } },
    }).queues;
    const started: ClaimedRow[] = [];
    const claims: number[] = [];
    const runner = new QueueRunner(
      config!,
      {
        accepting: true,
        claimBatchSize: 500,
        claim: async (queue, limit) => {
          const rows = await router.claim({ queue: queue.name, owner: 'w', limit, leaseMs: 60_000 });
          claims.push(rows.length);
          return rows;
        },
        frontClaimDue: (queue) => router.frontClaimDue(queue),
        start: (_runner, row) => void started.push(row), // the runner counts it as running
        handBack: async () => 'snoozed',
        reportError: (err) => {
          throw err;
        },
      },
      null,
    );
    const settle = async () => {
      await new Promise((resolve) => setImmediate(resolve));
      while (runner.pump) await runner.pump;
    };
    runner.wake();
    await settle();
    expect(claims).toEqual([60]); // from the front, short: the floor now trails the backlog

    // In one transaction, so that any claim sees both or neither: a job that became claimable an
    // hour "ago" (below the floor) and a fresh one (above it).
    const client = await pool.connect();
    let straggler: string;
    try {
      await client.query('BEGIN');
      straggler = await addStraggler(client, lh.schema, 'floor-runner');
      await lh.enqueue('floor-runner', { after: true }, { client });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    runner.wake(); // one wake-up, as one notification would give
    await settle();
    // The floored claim found the fresh job only; the loop went on from the front at once.
    expect(claims).toEqual([60, 1, 1]);
    expect(started.at(-1)?.id).toBe(straggler);
    expect(started).toHaveLength(62);
  });

  it('claims start at the front again once fullScanEveryMs has passed, whatever the backlog', async () => {
    const { lh, pool } = await backlogWithStraggler('periodic');
    const router = new ClaimRouter(lh.pool, lh.schema, { lagMs: 1000, fullScanEveryMs: 2000 });
    const params = { queue: 'periodic', owner: 'w', limit: 10, leaseMs: 60_000 };
    await router.claim(params);
    const straggler = await addStraggler(pool, lh.schema, 'periodic');
    expect((await router.claim(params)).map((row) => row.id)).not.toContain(straggler);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    expect((await router.claim(params))[0]?.id).toBe(straggler);
  });

  it('every job is claimed exactly once through floored claims, stragglers included', async () => {
    const { lh, pool } = await backlogWithStraggler('exactly-once');
    const router = new ClaimRouter(lh.pool, lh.schema, { lagMs: 0, fullScanEveryMs: 3_600_000 });
    const params = { queue: 'exactly-once', owner: 'w', limit: 7, leaseMs: 60_000 };
    const seen: string[] = [];
    seen.push(...(await router.claim(params)).map((row) => row.id));
    const stragglers = [
      await addStraggler(pool, lh.schema, 'exactly-once'),
      await addStraggler(pool, lh.schema, 'exactly-once'),
    ];
    for (;;) {
      const rows = await router.claim(params);
      if (rows.length === 0) break;
      seen.push(...rows.map((row) => row.id));
    }
    expect(seen).toHaveLength(62);
    expect(new Set(seen).size).toBe(62);
    expect(seen).toEqual(expect.arrayContaining(stragglers));
  });
});
