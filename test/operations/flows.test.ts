import { describe, expect, it } from 'vitest';
import { type Lease, type Leasehold, ValidationError } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';
import { expireLeases } from '../support/job-states.js';

async function claimAll(lh: Leasehold, queue: string): Promise<Lease[]> {
  return lh.claim({ queue, owner: 'w', limit: 100 });
}

function refsOf(leases: readonly Lease[], ids: Record<string, string>): string[] {
  const byId = new Map(Object.entries(ids).map(([ref, id]) => [id, ref]));
  return leases.map((lease) => byId.get(lease.jobId) as string).sort();
}

async function statuses(lh: Leasehold, id: string): Promise<Record<string, string>> {
  const flow = await lh.getFlow(id);
  return Object.fromEntries((flow?.nodes ?? []).map((node) => [node.ref, node.status]));
}

async function tableCounts(lh: Leasehold): Promise<Record<string, number>> {
  const pool = testPool(1);
  const { rows } = await pool.query(
    `SELECT (SELECT count(*) FROM "${lh.schema}".jobs)::int AS jobs,
            (SELECT count(*) FROM "${lh.schema}".flows)::int AS flows,
            (SELECT count(*) FROM "${lh.schema}".flow_nodes)::int AS nodes,
            (SELECT count(*) FROM "${lh.schema}".job_dependencies)::int AS edges`,
  );
  return rows[0];
}

describe('flows', () => {
  it('runs a diamond in dependency order: the join waits for both sides', async () => {
    const lh = await migratedClient();
    const q = 'diamond';
    const { ids } = await lh.enqueueFlow([
      { ref: 'a', queue: q, payload: { n: 'a' } },
      { ref: 'b', queue: q, payload: { n: 'b' }, dependsOn: ['a'] },
      { ref: 'c', queue: q, payload: { n: 'c' }, dependsOn: ['a'] },
      { ref: 'd', queue: q, payload: { n: 'd' }, dependsOn: ['b', 'c'] },
    ]);
    expect(await statuses(lh, ids.d as string)).toEqual({ a: 'pending', b: 'waiting', c: 'waiting', d: 'waiting' });
    const first = await claimAll(lh, q);
    expect(refsOf(first, ids)).toEqual(['a']);
    expect(await lh.complete(first[0] as Lease)).toBe(true);
    const middle = await claimAll(lh, q);
    expect(refsOf(middle, ids)).toEqual(['b', 'c']);
    const [b, c] = middle.sort((x, y) => Number(x.jobId) - Number(y.jobId));
    expect(await lh.complete(b as Lease)).toBe(true);
    expect(await claimAll(lh, q)).toEqual([]);
    expect(await lh.complete(c as Lease)).toBe(true);
    const last = await claimAll(lh, q);
    expect(refsOf(last, ids)).toEqual(['d']);
    expect(await lh.complete(last[0] as Lease)).toBe(true);
    const flow = await lh.getFlow(ids.a as string);
    expect(flow?.nodes.map((n) => [n.ref, n.status, n.dependsOn])).toEqual([
      ['a', 'succeeded', []],
      ['b', 'succeeded', ['a']],
      ['c', 'succeeded', ['a']],
      ['d', 'succeeded', ['b', 'c']],
    ]);
  });
});
