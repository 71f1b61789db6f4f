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
    expect(await statuses(lh, ids.d as string)).toEqual({
      a: 'pending',
      b: 'waiting',
      c: 'waiting',
      d: 'waiting',
    });
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

  it("a parent's stale completion is refused and releases nothing; its second run's completion does", async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const q = 'stale';
    const { ids } = await lh.enqueueFlow([
      { ref: 'parent', queue: q, payload: {}, maxAttempts: 3 },
      { ref: 'child', queue: q, payload: {}, dependsOn: ['parent'] },
    ]);
    const [first] = await claimAll(lh, q);
    await expireLeases(pool, lh.schema, { ids: [ids.parent as string] });
    // Lapsed but not yet swept: refused.
    expect(await lh.complete(first as Lease)).toBe(false);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    await pool.query(`UPDATE "${lh.schema}".jobs SET available_at = now() WHERE id = $1`, [ids.parent]);
    const [second] = await claimAll(lh, q);
    expect(second?.jobId).toBe(ids.parent);
    // Swept and reclaimed: the first run's late completion is refused too.
    expect(await lh.complete(first as Lease)).toBe(false);
    expect(await claimAll(lh, q)).toEqual([]);
    expect(await statuses(lh, ids.child as string)).toEqual({ parent: 'running', child: 'waiting' });
    expect(await lh.complete(second as Lease)).toBe(true);
    const [child] = await claimAll(lh, q);
    expect(child?.jobId).toBe(ids.child);
  });

  it('a failure that retries releases nothing', async () => {
    const lh = await migratedClient();
    const q = 'retry';
    const { ids } = await lh.enqueueFlow([
      { ref: 'p', queue: q, payload: {} },
      { ref: 'c', queue: q, payload: {}, dependsOn: ['p'], onParentDead: 'run' },
    ]);
    const [p] = await claimAll(lh, q);
    expect(await lh.fail(p as Lease, new Error('boom'), { delayMs: 0 })).toBe('retry');
    const again = await claimAll(lh, q);
    expect(refsOf(again, ids)).toEqual(['p']);
  });

  it("onParentDead 'block' (default): the child waits, the flow is listed as blocked, and replaying the parent resumes it", async () => {
    const lh = await migratedClient();
    const q = 'block';
    const { ids } = await lh.enqueueFlow([
      { ref: 'p', queue: q, payload: {} },
      { ref: 'c', queue: q, payload: {}, dependsOn: ['p'] },
    ]);
    const [p] = await claimAll(lh, q);
    expect(await lh.fail(p as Lease, new Error('boom'), { retryable: false, code: 'BROKEN' })).toBe('dead');
    expect(await claimAll(lh, q)).toEqual([]);
    expect(await statuses(lh, ids.c as string)).toEqual({ p: 'dead', c: 'blocked' });
    const blocked = await lh.blockedFlows();
    expect(blocked).toMatchObject([
      { jobId: ids.p, ref: 'p', queue: q, status: 'dead', lastErrorCode: 'BROKEN', blockedChildren: 1 },
    ]);
    await lh.replay([ids.p as string], { reason: 'fixed the bug' });
    expect(await lh.blockedFlows()).toEqual([]);
    const [again] = await claimAll(lh, q);
    expect(again?.jobId).toBe(ids.p);
    expect(await lh.complete(again as Lease)).toBe(true);
    const [c] = await claimAll(lh, q);
    expect(c?.jobId).toBe(ids.c);
  });

  it("onParentDead 'cancel': the child and its descendants are cancelled in the failing statement, naming the parent; 'run' children run", async () => {
    const lh = await migratedClient();
    const q = 'cancel';
    const { ids } = await lh.enqueueFlow([
      { ref: 'p', queue: q, payload: {} },
      { ref: 'other', queue: q, payload: {} },
      { ref: 'c', queue: q, payload: {}, dependsOn: ['p'], onParentDead: 'cancel' },
      { ref: 'grandchild', queue: q, payload: {}, dependsOn: ['c', 'other'] },
      { ref: 'runner', queue: q, payload: {}, dependsOn: ['p', 'other'], onParentDead: 'run' },
    ]);
    const roots = await claimAll(lh, q);
    expect(refsOf(roots, ids)).toEqual(['other', 'p']);
    const p = roots.find((lease) => lease.jobId === ids.p) as Lease;
    const other = roots.find((lease) => lease.jobId === ids.other) as Lease;
    expect(await lh.fail(p, new Error('boom'), { retryable: false })).toBe('dead');
    expect(await statuses(lh, ids.p as string)).toEqual({
      p: 'dead',
      other: 'running',
      c: 'cancelled',
      grandchild: 'cancelled',
      runner: 'waiting',
    });
    const c = await lh.getJob(ids.c as string, { history: true });
    expect(c?.lastErrorCode).toBe('PARENT_DEAD');
    expect(c?.history.at(-1)).toMatchObject({ kind: 'cancelled', errorCode: 'PARENT_DEAD' });
    expect(JSON.stringify(c?.history.at(-1))).toContain(ids.p as string);
    const grandchild = await lh.getJob(ids.grandchild as string);
    expect(grandchild?.lastErrorMessage).toContain(`parent job ${ids.p}`);
    // The runner still waits for its other parent, then runs.
    expect(await claimAll(lh, q)).toEqual([]);
    expect(await lh.complete(other)).toBe(true);
    const [runner] = await claimAll(lh, q);
    expect(runner?.jobId).toBe(ids.runner);
    // Nothing is blocked: the cancelled jobs hold nothing back.
    expect(await lh.blockedFlows()).toEqual([]);
  });

  it("a parent that died under 'run', was replayed and succeeded, releases its child once: the child still waits for its other parent", async () => {
    const lh = await migratedClient();
    const q = 'run-replayed';
    const { ids } = await lh.enqueueFlow([
      { ref: 'p', queue: q, payload: {} },
      { ref: 'other', queue: q, payload: {} },
      { ref: 'runner', queue: q, payload: {}, dependsOn: ['p', 'other'], onParentDead: 'run' },
    ]);
    const roots = await claimAll(lh, q);
    const p = roots.find((lease) => lease.jobId === ids.p) as Lease;
    const other = roots.find((lease) => lease.jobId === ids.other) as Lease;
    // p dies: under 'run' its edge to the runner is resolved, as a success would.
    expect(await lh.fail(p, new Error('boom'), { retryable: false })).toBe('dead');
    await lh.replay([ids.p as string], { reason: 'try again' });
    const [again] = await claimAll(lh, q);
    expect(again?.jobId).toBe(ids.p);
    // Its success now must not count that edge a second time.
    expect(await lh.complete(again as Lease)).toBe(true);
    expect(await claimAll(lh, q)).toEqual([]);
    expect(await statuses(lh, ids.p as string)).toMatchObject({ runner: 'waiting' });
    expect(await lh.complete(other)).toBe(true);
    const [runner] = await claimAll(lh, q);
    expect(runner?.jobId).toBe(ids.runner);
  });

  it('the recovery sweep that makes a parent dead applies the policies too', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const q = 'sweep';
    const { ids } = await lh.enqueueFlow([
      { ref: 'p', queue: q, payload: {}, maxAttempts: 1 },
      { ref: 'c', queue: q, payload: {}, dependsOn: ['p'], onParentDead: 'cancel' },
      { ref: 'r', queue: q, payload: {}, dependsOn: ['p'], onParentDead: 'run' },
      { ref: 'b', queue: q, payload: {}, dependsOn: ['p'] },
    ]);
    await claimAll(lh, q);
    await expireLeases(pool, lh.schema, { ids: [ids.p as string] });
    expect(await lh.recoverExpired()).toEqual({ retried: 0, dead: 1 });
    expect(await statuses(lh, ids.p as string)).toEqual({
      p: 'dead',
      c: 'cancelled',
      r: 'pending',
      b: 'blocked',
    });
    expect(refsOf(await claimAll(lh, q), ids)).toEqual(['r']);
  });

  it('cancelling a parent counts as its death for its children', async () => {
    const lh = await migratedClient();
    const q = 'cancel-parent';
    const { ids } = await lh.enqueueFlow([
      { ref: 'p', queue: q, payload: {} },
      { ref: 'c', queue: q, payload: {}, dependsOn: ['p'], onParentDead: 'cancel' },
      { ref: 'b', queue: q, payload: {}, dependsOn: ['p'] },
    ]);
    await lh.cancel(ids.p as string, { reason: 'not needed' });
    expect(await statuses(lh, ids.p as string)).toEqual({ p: 'cancelled', c: 'cancelled', b: 'blocked' });
    expect(await lh.blockedFlows()).toMatchObject([
      { jobId: ids.p, status: 'cancelled', blockedChildren: 1 },
    ]);
    expect(await claimAll(lh, q)).toEqual([]);
  });

  it('refuses cycles, unknown and duplicate refs, and graphs over the bounds, writing nothing', async () => {
    const lh = await migratedClient();
    const q = 'invalid';
    const bad: [unknown, RegExp][] = [
      [[{ ref: 'a', queue: q, dependsOn: ['a'] }], /cycle.*"a"/],
      [
        [
          { ref: 'a', queue: q, dependsOn: ['c'] },
          { ref: 'b', queue: q, dependsOn: ['a'] },
          { ref: 'c', queue: q, dependsOn: ['b'] },
          { ref: 'd', queue: q },
        ],
        /cycle/,
      ],
      [[{ ref: 'a', queue: q, dependsOn: ['nope'] }], /unknown ref "nope"/],
      [
        [
          { ref: 'a', queue: q },
          { ref: 'a', queue: q },
        ],
        /"a" is used by another node/,
      ],
      [
        [
          { ref: 'a', queue: q },
          { ref: 'b', queue: q, dependsOn: ['a', 'a'] },
        ],
        /lists "a" twice/,
      ],
      [[{ ref: 'a', queue: q, onParentDead: 'ignore' }], /onParentDead/],
      [[{ ref: 'a', queue: q, orderingKey: 'k' }], /orderingKey/],
      [[{ ref: '', queue: q }], /ref/],
      [[{ ref: 'a' }], /needs a task or a queue/],
      [[], /1 to 20000/],
      [Array.from({ length: 20_001 }, (_, i) => ({ ref: `n${i}`, queue: q })), /1 to 20000/],
    ];
    // A dense DAG of 330 nodes has 54,285 edges: over the 50,000 bound.
    const dense = Array.from({ length: 330 }, (_, i) => ({
      ref: `n${i}`,
      queue: q,
      dependsOn: Array.from({ length: i }, (_, j) => `n${j}`),
    }));
    bad.push([dense, /more than 50000 dependencies/]);
    for (const [nodes, message] of bad) {
      const error = await lh.enqueueFlow(nodes as never).catch((err: unknown) => err);
      expect(error, String(message)).toBeInstanceOf(ValidationError);
      expect((error as Error).message).toMatch(message);
    }
    expect(await tableCounts(lh)).toEqual({ jobs: 0, flows: 0, nodes: 0, edges: 0 });
  });

  it("in the caller's transaction: a rollback leaves nothing, a commit everything", async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const client = await pool.connect();
    try {
      const nodes = [
        { ref: 'a', queue: 'tx', payload: {} },
        { ref: 'b', queue: 'tx', payload: {}, dependsOn: ['a'] },
      ];
      await client.query('BEGIN');
      await lh.enqueueFlow(nodes, { client });
      await client.query('ROLLBACK');
      expect(await tableCounts(lh)).toEqual({ jobs: 0, flows: 0, nodes: 0, edges: 0 });
      await client.query('BEGIN');
      const { ids } = await lh.enqueueFlow(nodes, { client });
      await client.query('COMMIT');
      expect(await tableCounts(lh)).toEqual({ jobs: 2, flows: 1, nodes: 2, edges: 1 });
      expect(await statuses(lh, ids.b as string)).toEqual({ a: 'pending', b: 'waiting' });
    } finally {
      client.release();
    }
  });

  it('retention removes a flow with its nodes and edges once none of its jobs has a record left', async () => {
    const lh = await migratedClient({ succeededRetentionMs: 0 });
    const q = 'prune';
    const { ids } = await lh.enqueueFlow([
      { ref: 'a', queue: q, payload: {} },
      { ref: 'b', queue: q, payload: {}, dependsOn: ['a'] },
    ]);
    const [a] = await claimAll(lh, q);
    await lh.complete(a as Lease);
    await lh.prune();
    // b is still pending: the flow stays, a reads 'removed'.
    expect(await statuses(lh, ids.b as string)).toEqual({ a: 'removed', b: 'pending' });
    expect(await tableCounts(lh)).toMatchObject({ flows: 1, nodes: 2, edges: 1 });
    const [b] = await claimAll(lh, q);
    await lh.complete(b as Lease);
    await lh.prune();
    expect(await tableCounts(lh)).toEqual({ jobs: 0, flows: 0, nodes: 0, edges: 0 });
    expect(await lh.getFlow(ids.a as string)).toBeNull();
  });
});
