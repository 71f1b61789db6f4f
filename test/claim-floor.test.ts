import { describe, expect, it } from 'vitest';
import { ClaimRouter } from '../src/operations/claim-router.js';
import { migratedClient, testPool } from './support/db.js';

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
  pool: ReturnType<typeof testPool>,
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
  it('a claim from a floor skips what lies below it while full batches remain, and a short claim is completed from the front', async () => {
    const { lh, pool } = await backlogWithStraggler('floor');
    const router = new ClaimRouter(lh.pool, lh.schema, { lagMs: 1000, fullScanEveryMs: 3_600_000 });
    const params = { queue: 'floor', owner: 'w', limit: 20, leaseMs: 60_000 };

    const first = await router.claim(params); // from the front: sets the floor
    expect(first).toHaveLength(20);
    const straggler = await addStraggler(pool, lh.schema, 'floor');

    const second = await router.claim(params); // from the floor: a full batch above it
    expect(second).toHaveLength(20);
    expect(second.map((row) => row.id)).not.toContain(straggler);

    // 20 jobs left above the floor: a claim of 25 comes back short and is completed from the
    // front, which finds the straggler; rows come back in preference order (oldest first).
    const third = await router.claim({ ...params, limit: 25 });
    expect(third).toHaveLength(21);
    expect(third[0]?.id).toBe(straggler);
    const times = third.map((row) => row.available_at.getTime());
    expect(times).toEqual([...times].sort((a, b) => a - b));
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
