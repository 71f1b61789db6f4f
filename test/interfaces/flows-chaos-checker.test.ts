import { describe, expect, it } from 'vitest';
import type { Lease, Leasehold } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';

// The flows rules of the chaos checker on planted histories: a clean run keeps them, and each
// planted anomaly breaks the rule written for it (its negative control).

type Facts = { child_runs: number; early_runs: number; stranded: number };
const flows = (await import('../../chaos/checker/flows-checker.mjs' as string)) as {
  checkFlows(db: unknown, schemas: { leasehold: string; ledger: string }): Promise<Facts>;
  flowInvariants(facts: Facts): { name: string; ok: boolean }[];
};

async function setup(onParentDead: 'block' | 'run' = 'block') {
  const lh = await migratedClient();
  const pool = testPool(2);
  const ledger = `${lh.schema}_ledger`;
  // The schema pool may hand this schema on from a file that made a ledger beside it too.
  await pool.query(`DROP SCHEMA IF EXISTS "${ledger}" CASCADE`);
  await pool.query(`CREATE SCHEMA "${ledger}"`);
  await pool.query(
    `CREATE TABLE "${ledger}".runs (job_id bigint NOT NULL, token bigint NOT NULL,
       started_at timestamptz NOT NULL DEFAULT clock_timestamp())`,
  );
  const { ids } = await lh.enqueueFlow([
    { ref: 'p', queue: 'chaos', payload: {} },
    { ref: 'c', queue: 'chaos', payload: {}, dependsOn: ['p'], onParentDead },
  ]);
  const run = (id: string, at = 'clock_timestamp()') =>
    pool.query(`INSERT INTO "${ledger}".runs (job_id, token, started_at) VALUES ($1, 1, ${at})`, [id]);
  const broken = async () => {
    const facts = await flows.checkFlows(pool, { leasehold: lh.schema, ledger });
    return {
      facts,
      broken: flows
        .flowInvariants(facts)
        .filter((rule) => !rule.ok)
        .map((rule) => rule.name),
    };
  };
  return { lh, pool, ids: ids as Record<'p' | 'c', string>, run, broken };
}

async function claimOne(lh: Leasehold): Promise<Lease> {
  const [lease] = await lh.claim({ queue: 'chaos', owner: 'w' });
  return lease as Lease;
}

describe('the chaos checker: flows rules on planted histories', () => {
  it('keeps both rules on a clean history: the child ran after its parent succeeded', async () => {
    const { lh, ids, run, broken } = await setup();
    await run(ids.p);
    expect(await lh.complete(await claimOne(lh))).toBe(true);
    const child = await claimOne(lh);
    await run(ids.c);
    expect(await lh.complete(child)).toBe(true);
    expect(await broken()).toEqual({
      facts: expect.objectContaining({ child_runs: 1, early_runs: 0, stranded: 0 }),
      broken: [],
    });
  });

  it('flags a child run that started before its parent succeeded', async () => {
    const { lh, ids, run, broken } = await setup();
    await run(ids.c, "clock_timestamp() - interval '1 second'");
    expect(await lh.complete(await claimOne(lh))).toBe(true);
    expect((await broken()).broken).toEqual(['flow child runs started before all their parents succeeded']);
  });

  it("flags a child that ran while its parent was dead, unless the child's policy is 'run'", async () => {
    for (const policy of ['block', 'run'] as const) {
      const { lh, ids, run, broken } = await setup(policy);
      expect(await lh.fail(await claimOne(lh), new Error('no'), { retryable: false })).toBe('dead');
      await run(ids.c);
      expect((await broken()).broken).toEqual(
        policy === 'run' ? [] : ['flow child runs started before all their parents succeeded'],
      );
    }
  });

  it('flags a child stranded behind parents that all succeeded (a lost release)', async () => {
    const { lh, pool, ids, broken } = await setup();
    expect(await lh.complete(await claimOne(lh))).toBe(true);
    await pool.query(`UPDATE "${lh.schema}".jobs SET waiting_parents = 1 WHERE id = $1`, [ids.c]);
    expect((await broken()).broken).toEqual(['flow children still waiting for parents that all succeeded']);
  });
});
