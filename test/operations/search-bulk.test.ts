import { beforeAll, describe, expect, it } from 'vitest';
import type { Leasehold } from '../../src/index.js';
import { beginBulk, bulkAction, bulkActions, previewBulk } from '../../src/operations/operator/bulk.js';
import { type JobSearch, searchJobsPage, setPayloadSearch } from '../../src/operations/operator/search.js';
import { ValidationError } from '../../src/shared/errors.js';
import { migratedClient, testPool } from '../support/db.js';

// Job search over every source (live, terminal, retained succeeded) and bulk actions by filter,
// on a real PostgreSQL. Each test works in its own queues.

let lh: Leasehold;
const db = () => lh.pool;
const search = (s: JobSearch, options?: { limit?: number; cursor?: string }) =>
  searchJobsPage(db(), lh.schema, s, options);
const ids = async (s: JobSearch) => (await search(s, { limit: 1000 })).jobs.map((j) => j.id);

beforeAll(async () => {
  lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
});

async function killOne(queue: string, code: string): Promise<string> {
  const { id } = await lh.enqueue(queue, { kill: code });
  const [lease] = await lh.claim({ queue, owner: 'w' });
  expect(lease?.jobId).toBe(id);
  await lh.fail(lease!, new Error('boom'), { code, retryable: false });
  return id;
}

describe('search finds jobs in every state by each filter', () => {
  it('by status, queue, task, id, error code, ordering and idempotency key, and time', async () => {
    const q = 's-states';
    const pending = (await lh.enqueue(q, { n: 1 })).id;
    const head = (await lh.enqueue(q, { n: 2 }, { orderingKey: 'acct-1' })).id;
    const blocked = (await lh.enqueue(q, { n: 3 }, { orderingKey: 'acct-1' })).id;
    const keyed = (await lh.enqueue(q, { n: 4 }, { idempotencyKey: 'order-77' })).id;
    // Claim in order: pending, head, keyed (blocked is not claimable).
    const leases = await lh.claim({ queue: q, owner: 'w', limit: 10 });
    expect(leases.map((l) => l.jobId).sort()).toEqual([pending, head, keyed].sort());
    const byId = new Map(leases.map((l) => [l.jobId, l]));
    await lh.complete(byId.get(pending)!);
    await lh.fail(byId.get(keyed)!, new Error('nope'), { code: 'NOPE', retryable: false });
    const running = head; // still running
    const cancelledId = (await lh.enqueue(q, { n: 5 })).id;
    await lh.cancel(cancelledId, { reason: 'not needed' });

    const statusOf = async (status: JobSearch['status']) => ids({ queue: q, status });
    expect(await statusOf('succeeded')).toEqual([pending]);
    expect(await statusOf('running')).toEqual([running]);
    expect(await statusOf('blocked')).toEqual([blocked]);
    expect(await statusOf('dead')).toEqual([keyed]);
    expect(await statusOf('cancelled')).toEqual([cancelledId]);
    expect(await statusOf('pending')).toEqual([]);
    // Every job of the queue, newest first, across the three sources.
    expect(await ids({ queue: q })).toEqual([cancelledId, keyed, blocked, head, pending]);
    expect(await ids({ task: q, status: 'succeeded' })).toEqual([pending]);
    expect(await ids({ id: blocked })).toEqual([blocked]);
    expect(await ids({ id: pending })).toEqual([pending]);
    expect(await ids({ queue: q, errorCode: 'NOPE' })).toEqual([keyed]);
    expect(await ids({ orderingKey: 'acct-1' })).toEqual([blocked, head]);
    expect(await ids({ idempotencyKey: 'order-77' })).toEqual([keyed]);
    const page = await search({ queue: q, status: 'blocked' });
    expect(page.jobs[0]).toMatchObject({
      id: blocked,
      status: 'blocked',
      orderingKey: 'acct-1',
      queueName: q,
    });

    const { rows } = await testPool(1).query<{ at: Date }>(
      `SELECT created_at AS at FROM "${lh.schema}".jobs WHERE id = $1`,
      [blocked],
    );
    const at = rows[0]!.at;
    expect(await ids({ queue: q, createdFrom: at, createdTo: new Date(at.getTime() + 1) })).toContain(
      blocked,
    );
    expect(await ids({ queue: q, createdTo: at })).not.toContain(blocked);
    expect(await ids({ queue: q, finishedFrom: new Date(Date.now() - 60_000) })).toEqual([
      cancelledId,
      keyed,
      pending,
    ]);
    expect(await ids({ queue: q, finishedTo: new Date(Date.now() - 60_000) })).toEqual([]);
  });

  it('by schedule, by flow, and blocked: behind an ordering key or waiting for flow parents', async () => {
    const q = 's-made';
    // Two ticks of one schedule (one job succeeded, one pending), one of another, a plain job. The
    // older tick is written as the scheduler writes it (its job, then its schedule_ticks row), so
    // the test does not wait for a second tick of the clock.
    await lh.schedule('s-nightly', { cron: '* * * * * *', queue: q, payload: {} });
    await lh.schedule('s-other', { cron: '* * * * * *', queue: q, payload: {} });
    const nightly1 = (await lh.enqueue(q, {})).id;
    await testPool(1).query(
      `INSERT INTO "${lh.schema}".schedule_ticks (schedule_name, tick_at, job_id)
       VALUES ('s-nightly', now() - interval '1 hour', $1)`,
      [nightly1],
    );
    const [lease] = await lh.claim({ queue: q, owner: 'w' });
    expect(lease?.jobId).toBe(nightly1);
    await lh.complete(lease!);
    await testPool(1).query(
      `UPDATE "${lh.schema}".schedules SET fire_after = now() - interval '1 second' WHERE name LIKE 's-%'`,
    );
    const { fired } = await lh.runSchedules();
    // Each schedule fired one tick, or two when the clock passed a second between the update and
    // the pass (per-second schedules due a second ago); newest first, as the search lists them.
    const firedBy = (name: string) =>
      fired
        .filter((f) => f.schedule === name)
        .sort((a, b) => b.tickAt.getTime() - a.tickAt.getTime())
        .map((f) => f.jobId);
    const nightly = firedBy('s-nightly');
    const other = firedBy('s-other');
    for (const jobs of [nightly, other]) expect(jobs.length === 1 || jobs.length === 2).toBe(true);
    const plain = (await lh.enqueue(q, {})).id;
    expect(await ids({ schedule: 's-nightly' })).toEqual([...nightly, nightly1]);
    expect(await ids({ schedule: 's-nightly', status: 'pending' })).toEqual(nightly);
    expect(await ids({ queue: q, schedule: 's-other' })).toEqual(other);
    expect(await ids({ schedule: 's-none' })).toEqual([]);
    expect(await ids({ queue: q })).toContain(plain);
    await expect(search({ schedule: 'bad name' })).rejects.toThrow(ValidationError);

    // A flow: a runs, b and c wait for it; d (another flow) waits too; an ordering-key waiter.
    const fq = 's-flows';
    const flow = await lh.enqueueFlow([
      { ref: 'a', queue: fq, payload: {} },
      { ref: 'b', queue: fq, payload: {}, dependsOn: ['a'] },
      { ref: 'c', queue: fq, payload: {}, dependsOn: ['a', 'b'] },
    ]);
    const second = await lh.enqueueFlow([
      { ref: 'x', queue: fq, payload: {} },
      { ref: 'y', queue: fq, payload: {}, dependsOn: ['x'] },
    ]);
    await lh.enqueue(fq, {}, { orderingKey: 'k' });
    const keyWaiter = (await lh.enqueue(fq, {}, { orderingKey: 'k' })).id;
    const { a, b, c } = flow.ids;
    expect(await ids({ flow: flow.flowId })).toEqual([c, b, a]);
    expect(await ids({ flow: second.flowId })).toEqual([second.ids.y, second.ids.x]);
    expect(await ids({ queue: fq, status: 'blocked' })).toEqual([keyWaiter, second.ids.y, c, b]);
    expect(await ids({ flow: flow.flowId, status: 'blocked' })).toEqual([c, b]);
    expect(await ids({ flow: flow.flowId, status: 'pending' })).toEqual([a]);
    expect((await search({ id: b })).jobs[0]?.status).toBe('blocked');
    // a succeeds: b is released (pending), c still waits for b; a is found among succeeded jobs.
    const [leaseA] = await lh.claim({ queue: fq, owner: 'w', limit: 1 });
    expect(leaseA?.jobId).toBe(a);
    await lh.complete(leaseA!);
    expect(await ids({ flow: flow.flowId, status: 'blocked' })).toEqual([c]);
    expect(await ids({ flow: flow.flowId, status: 'pending' })).toEqual([b]);
    expect(await ids({ flow: flow.flowId, status: 'succeeded' })).toEqual([a]);
    expect(await ids({ flow: flow.flowId })).toEqual([c, b, a]);
    await expect(search({ flow: 'abc' })).rejects.toThrow(ValidationError);
    // Bulk actions take the same filters: cancel every blocked job of the flow.
    expect(
      await previewBulk(db(), lh.schema, 'cancel', { flow: flow.flowId, status: 'blocked' }),
    ).toMatchObject({ matched: 1 });
  });

  it('pages with a keyset cursor: no job twice, none missed, while new jobs arrive', async () => {
    const q = 's-pages';
    const { ids: made } = await lh.enqueueMany(
      q,
      Array.from({ length: 23 }, (_, n) => ({ payload: { n } })),
    );
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pageNo = 0; pageNo < 10; pageNo++) {
      const page = await search({ queue: q }, { limit: 5, cursor });
      seen.push(...page.jobs.map((j) => j.id));
      if (pageNo === 0) await lh.enqueue(q, { late: true }); // newer than the cursor: not on later pages
      if (!page.cursor) break;
      cursor = page.cursor;
    }
    expect(seen).toEqual([...made].reverse());
    await expect(search({ queue: q }, { cursor: 'bogus' })).rejects.toThrow(ValidationError);
  });

  it('refuses bad criteria with a typed error', async () => {
    await expect(search({ status: 'lost' as never })).rejects.toThrow(/status/);
    await expect(search({ queue: 'bad name' })).rejects.toThrow(ValidationError);
    await expect(search({ createdFrom: 'yesterday' })).rejects.toThrow(/ISO 8601/);
    await expect(search({ colour: 'red' } as never)).rejects.toThrow(/colour/);
    await expect(search({ task: 'a', queue: 'b' })).rejects.toThrow(/task/);
  });

  it('searches payloads only of a queue that opted in, and only its prefix', async () => {
    const q = 's-payload';
    const { id } = await lh.enqueue(q, { customer: 'Ada Lovelace', description: `${'x'.repeat(300)}needle` });
    await expect(search({ queue: q, payload: 'Ada' })).rejects.toThrow(/opted in/);
    await expect(search({ payload: 'Ada' })).rejects.toThrow(/needs a queue/);
    await setPayloadSearch(db(), lh.schema, q, 100);
    expect(await ids({ queue: q, payload: 'ada lovelace' })).toEqual([id]);
    // Past the 100-character prefix: not searched.
    expect(await ids({ queue: q, payload: 'needle' })).toEqual([]);
    await setPayloadSearch(db(), lh.schema, q, null);
    await expect(search({ queue: q, payload: 'Ada' })).rejects.toThrow(/opted in/);
  });

  it("the client's setPayloadSearch opens and closes a queue's payloads, checking its arguments", async () => {
    const q = 's-payload-client';
    const { id } = await lh.enqueue(q, { customer: 'Grace Hopper' });
    await lh.setPayloadSearch(q, 64);
    expect(await ids({ queue: q, payload: 'grace' })).toEqual([id]);
    await lh.setPayloadSearch(q, null);
    await expect(search({ queue: q, payload: 'grace' })).rejects.toThrow(/opted in/);
    await expect(lh.setPayloadSearch(q, 0)).rejects.toThrow(ValidationError);
    await expect(lh.setPayloadSearch('bad name', 64)).rejects.toThrow(ValidationError);
  });
});

describe('bulk actions by filter', () => {
  it('replays every dead job a filter matches in batches, the preview count equal to the result', async () => {
    const q = 'b-replay';
    const dead: string[] = [];
    for (let i = 0; i < 7; i++) dead.push(await killOne(q, i < 5 ? 'TIMEOUT' : 'OTHER'));
    const preview = await previewBulk(db(), lh.schema, 'replay', { queue: q, errorCode: 'TIMEOUT' });
    expect(preview).toEqual({ matched: 5, capped: false });
    const progress: number[] = [];
    const result = await bulkAction(
      db(),
      lh.schema,
      'replay',
      { queue: q, errorCode: 'TIMEOUT' },
      {
        reason: 'upstream fixed',
        actor: 'ops@example',
        batchSize: 2,
        expectedCount: 5,
        onProgress: (p) => progress.push(p.done),
      },
    );
    expect(result).toMatchObject({ matched: 5, done: 5 });
    expect(progress).toEqual([2, 4, 5]);
    expect(await ids({ queue: q, status: 'dead' })).toEqual(dead.slice(5).reverse());
    const job = await lh.getJob(dead[0]!, { history: true });
    expect(job?.status).toBe('pending');
    expect(job?.history.at(-1)).toMatchObject({
      kind: 'replayed',
      actor: 'ops@example',
      reason: 'upstream fixed',
    });
    const [logged] = await bulkActions(db(), lh.schema, { id: result.id });
    expect(logged).toMatchObject({
      action: 'replay',
      matched: 5,
      done: 5,
      state: 'finished',
      actor: 'ops@example',
    });
    expect(logged?.filter).toEqual({ queue: q, errorCode: 'TIMEOUT' });
  });

  it('refuses when the confirmed count no longer matches, changing nothing', async () => {
    const q = 'b-stale';
    await killOne(q, 'X');
    await killOne(q, 'X');
    await expect(
      beginBulk(db(), lh.schema, 'replay', { queue: q }, { reason: 'r', expectedCount: 1 }),
    ).rejects.toThrow(/matches 2 jobs now, not the 1 confirmed/);
    expect(await ids({ queue: q, status: 'dead' })).toHaveLength(2);
  });

  it('cancels live jobs (waiting ones of a key before its head, none released to run)', async () => {
    const q = 'b-cancel';
    const plain = (await lh.enqueueMany(q, [{ payload: 1 }, { payload: 2 }])).ids;
    const keyed = (
      await lh.enqueueMany(
        q,
        [1, 2, 3].map((n) => ({ payload: n, orderingKey: 'k' })),
      )
    ).ids;
    const dead = await killOne(`${q}-other`, 'E');
    const preview = await previewBulk(db(), lh.schema, 'cancel', { queue: q });
    expect(preview.matched).toBe(5);
    const result = await bulkAction(
      db(),
      lh.schema,
      'cancel',
      { queue: q },
      { reason: 'tidy', batchSize: 500 },
    );
    expect(result.done).toBe(5);
    expect(await ids({ queue: q, status: 'cancelled' })).toEqual(
      [...plain, ...keyed].sort((a, b) => Number(b) - Number(a)),
    );
    // The key's waiting jobs went before its head, latest first, so none was released to run.
    const { rows } = await testPool(1).query<{ job_id: string }>(
      `SELECT job_id::text FROM "${lh.schema}".job_events WHERE job_id = ANY($1::bigint[]) ORDER BY id`,
      [keyed],
    );
    expect(rows.map((r) => r.job_id)).toEqual([...keyed].reverse());
    expect((await lh.getJob(dead))?.status).toBe('dead');
    await expect(previewBulk(db(), lh.schema, 'cancel', { status: 'dead' })).rejects.toThrow(
      /cancel applies only/,
    );
  });

  it('removes terminal and succeeded jobs, leaving a tombstone with actor and reason; keeps a dead head', async () => {
    const q = 'b-remove';
    const deadPlain = await killOne(q, 'E');
    const { id: done } = await lh.enqueue(q, {});
    const [lease] = await lh.claim({ queue: q, owner: 'w' });
    await lh.complete(lease!);
    await lh.enqueueMany(q, [
      { payload: 1, orderingKey: 'h' },
      { payload: 2, orderingKey: 'h' },
    ]);
    const [headLease] = await lh.claim({ queue: q, owner: 'w' });
    await lh.fail(headLease!, new Error('x'), { code: 'E', retryable: false });
    const live = (await lh.enqueue(q, {})).id;
    const result = await bulkAction(
      db(),
      lh.schema,
      'remove',
      { queue: q },
      { reason: 'gdpr', actor: 'dpo' },
    );
    expect(result.done).toBe(2);
    expect(await ids({ queue: q })).toEqual(expect.arrayContaining([live, headLease!.jobId]));
    expect(await ids({ id: deadPlain })).toEqual([]);
    expect(await ids({ id: done })).toEqual([]);
    const { rows } = await testPool(1).query(
      `SELECT job_id::text, kind, actor, reason FROM "${lh.schema}".job_events WHERE job_id = ANY($1::bigint[]) ORDER BY job_id`,
      [[deadPlain, done]],
    );
    expect(rows).toEqual([
      { job_id: deadPlain, kind: 'removed', actor: 'dpo', reason: 'gdpr' },
      { job_id: done, kind: 'removed', actor: 'dpo', reason: 'gdpr' },
    ]);
  });

  it('refuses an empty filter, a payload search and a missing reason', async () => {
    await expect(previewBulk(db(), lh.schema, 'replay', {})).rejects.toThrow(/at least one criterion/);
    await expect(beginBulk(db(), lh.schema, 'replay', { queue: 'q' }, {} as never)).rejects.toThrow(/reason/);
  });
});
