import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTask, type EnqueueOptions, ValidationError } from '../../src/index.js';
import {
  countByStatus,
  databaseUrl,
  listenOptions,
  migratedClient,
  testPool,
  waitFor,
} from '../support/db.js';
import { databaseNow, dedupeEvents, endDedupeWindows } from '../support/dedupe.js';
import { rejection } from '../support/hostile.js';
import { finishedSince } from '../support/job-states.js';
import { started } from '../support/worker.js';

const throttle = (key: string, windowMs = 60_000): EnqueueOptions => ({
  dedupe: { key, mode: 'throttle', windowMs },
});
const debounce = (key: string, windowMs = 60_000): EnqueueOptions => ({
  dedupe: { key, mode: 'debounce', windowMs },
});
const replace = (key: string): EnqueueOptions => ({ dedupe: { key, mode: 'replace' } });

describe('dedupe mode throttle', () => {
  it('keeps the first job of a window whatever becomes of it, then opens a new window', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const first = await lh.enqueue('mail', { n: 1 }, throttle('user-7'));
    expect(first.created).toBe(true);
    expect(await lh.enqueue('mail', { n: 2 }, throttle('user-7'))).toEqual({ id: first.id, created: false });
    // Running, then succeeded: still the window's job.
    const [lease] = await lh.claim({ queue: 'mail', owner: 'w' });
    expect(await lh.enqueue('mail', { n: 3 }, throttle('user-7'))).toEqual({ id: first.id, created: false });
    expect(await lh.complete(lease!)).toBe(true);
    expect(await lh.enqueue('mail', { n: 4 }, throttle('user-7'))).toEqual({ id: first.id, created: false });
    // Keys are per queue and per key.
    expect((await lh.enqueue('mail', {}, throttle('user-8'))).created).toBe(true);
    expect((await lh.enqueue('sms', {}, throttle('user-7'))).created).toBe(true);
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 2, succeeded: 1 });
    // Each collapsed enqueue is recorded on the surviving job, which is otherwise untouched.
    expect(await dedupeEvents(pool, lh.schema)).toEqual(
      [1, 2, 3].map(() => ({
        jobId: first.id,
        statusAfter: null,
        detail: { mode: 'throttle', key: 'user-7' },
      })),
    );
    const history = await lh.getJob(first.id, { history: true });
    expect(history!.history.filter((e) => e.kind === 'deduplicated')).toHaveLength(3);

    await endDedupeWindows(pool, lh.schema, ['user-7']);
    const next = await lh.enqueue('mail', { n: 5 }, throttle('user-7'));
    expect(next.created).toBe(true);
    expect(next.id).not.toBe(first.id);
    expect(await lh.enqueue('mail', { n: 6 }, throttle('user-7'))).toEqual({ id: next.id, created: false });
    expect((await lh.getJob(next.id))?.payload).toEqual({ n: 5 });
  });

  it('the window is measured in database time from the job that opened it', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const before = await databaseNow(pool);
    await lh.enqueue('t', {}, throttle('k', 1500));
    const after = await databaseNow(pool);
    const { rows } = await pool.query(`SELECT window_ends_at FROM "${lh.schema}".dedupe_keys`);
    const ends = (rows[0].window_ends_at as Date).getTime();
    expect(ends).toBeGreaterThanOrEqual(before.getTime() + 1500);
    expect(ends).toBeLessThanOrEqual(after.getTime() + 1500);
    // A short window runs out by itself: waited for in database time, not slept through.
    const short = await lh.enqueue('t', {}, throttle('short', 50));
    await waitFor(
      async () =>
        (
          await pool.query(
            `SELECT 1 FROM "${lh.schema}".dedupe_keys WHERE dedupe_key = 'short' AND window_ends_at < now()`,
          )
        ).rowCount,
      { what: 'the 50 ms window to end' },
    );
    const again = await lh.enqueue('t', {}, throttle('short', 50));
    expect(again.created).toBe(true);
    expect(again.id).not.toBe(short.id);
  });
});

describe('dedupe mode debounce', () => {
  it('each enqueue moves the pending job to now() + window and gives it the newest payload', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const first = await lh.enqueue('search-index', { v: 1 }, debounce('doc-1', 5000));
    expect(first.created).toBe(true);
    const before = await databaseNow(pool);
    const second = await lh.enqueue('search-index', { v: 2 }, debounce('doc-1', 5000));
    const after = await databaseNow(pool);
    expect(second).toEqual({ id: first.id, created: false });
    const job = await lh.getJob(first.id);
    expect(job?.payload).toEqual({ v: 2 });
    expect(job!.availableAt.getTime()).toBeGreaterThanOrEqual(before.getTime() + 5000);
    expect(job!.availableAt.getTime()).toBeLessThanOrEqual(after.getTime() + 5000);
    // Not claimable until the window after the last enqueue has passed.
    expect(await lh.claim({ queue: 'search-index', owner: 'w' })).toEqual([]);
    expect(await dedupeEvents(pool, lh.schema)).toEqual([
      { jobId: first.id, statusAfter: 'pending', detail: { mode: 'debounce', key: 'doc-1' } },
    ]);
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 1 });
  });

  it('runs the job once the window after the last enqueue has passed (short window, polled)', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('d', { v: 1 }, debounce('k', 100));
    await lh.enqueue('d', { v: 2 }, debounce('k', 100));
    const [lease] = await waitFor(async () => {
      const leases = await lh.claim({ queue: 'd', owner: 'w' });
      return leases.length > 0 ? leases : null;
    });
    expect(lease).toMatchObject({ jobId: id, payload: { v: 2 } });
  });

  it('a running job is not touched: a new job is queued behind the key', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue('d', { v: 1 }, debounce('k', 1));
    const [lease] = await waitFor(async () => {
      const leases = await lh.claim({ queue: 'd', owner: 'w' });
      return leases.length > 0 ? leases : null;
    });
    const next = await lh.enqueue('d', { v: 2 }, debounce('k', 60_000));
    expect(next.created).toBe(true);
    expect(next.id).not.toBe(id);
    const running = await lh.getJob(id);
    expect(running).toMatchObject({ status: 'running', payload: { v: 1 }, leaseToken: lease!.token });
    expect(await lh.complete(lease!)).toBe(true);
    // The new job is now the one later enqueues fold into.
    expect(await lh.enqueue('d', { v: 3 }, debounce('k', 60_000))).toEqual({ id: next.id, created: false });
    expect((await lh.getJob(next.id))?.payload).toEqual({ v: 3 });
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 1, succeeded: 1 });
  });
});

describe('dedupe mode replace', () => {
  it('a pending job gets the new payload and run time, keeping its id', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const first = await lh.enqueue('sync', { v: 1 }, { ...replace('acct-1'), delayMs: 60_000 });
    expect(await lh.enqueue('sync', { v: 2 }, replace('acct-1'))).toEqual({ id: first.id, created: false });
    const [lease] = await lh.claim({ queue: 'sync', owner: 'w' });
    expect(lease).toMatchObject({ jobId: first.id, payload: { v: 2 } });
    expect(await dedupeEvents(pool, lh.schema)).toEqual([
      { jobId: first.id, statusAfter: 'pending', detail: { mode: 'replace', key: 'acct-1' } },
    ]);
  });

  it("a running job is cancelled by bumping its token: the old worker's completion is refused and counted, the new job runs", async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const old = await lh.enqueue('sync', { v: 1 }, replace('acct-1'));
    const [stale] = await lh.claim({ queue: 'sync', owner: 'old-worker' });
    const fresh = await lh.enqueue('sync', { v: 2 }, replace('acct-1'));
    expect(fresh).toMatchObject({ created: true, cancelledJobId: old.id });
    expect(fresh.id).not.toBe(old.id);

    expect(await lh.heartbeat(stale!)).toBe(false);
    expect(await lh.complete(stale!)).toBe(false);
    expect(await lh.leaseRefusals()).toEqual([
      expect.objectContaining({ queue: 'sync', operation: 'complete', count: 1 }),
      expect.objectContaining({ queue: 'sync', operation: 'heartbeat', count: 1 }),
    ]);
    const cancelled = await lh.getJob(old.id, { history: true });
    expect(cancelled).toMatchObject({ status: 'cancelled', lastErrorCode: 'CANCELLED', leaseOwner: null });
    expect(BigInt(cancelled!.leaseToken)).toBe(BigInt(stale!.token) + 1n);
    expect(cancelled!.history.map((e) => [e.kind, e.owner, e.operation])).toEqual([
      ['enqueued', null, null],
      ['claimed', 'old-worker', null],
      ['cancelled', 'old-worker', null],
      ['refused', 'old-worker', 'heartbeat'],
      ['refused', 'old-worker', 'complete'],
    ]);
    expect(cancelled!.history[2]).toMatchObject({ reason: 'replaced', detail: { replacedBy: fresh.id } });

    // The survivor records what it replaced, and runs.
    const survivor = await lh.getJob(fresh.id, { history: true });
    expect(survivor!.history.filter((e) => e.kind === 'deduplicated').map((e) => e.detail)).toEqual([
      { mode: 'replace', key: 'acct-1', replacedJob: old.id },
    ]);
    const [lease] = await lh.claim({ queue: 'sync', owner: 'new-worker' });
    expect(lease).toMatchObject({ jobId: fresh.id, payload: { v: 2 } });
    expect(await lh.complete(lease!)).toBe(true);
    expect(await countByStatus(pool, lh.schema)).toEqual({ cancelled: 1, succeeded: 1 });
  });

  it('a running job holding a per-key concurrency slot gives it back when replaced', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.configureQueue('limited', { concurrencyLimitPerKey: 1 });
    await lh.enqueue('limited', { v: 1 }, { ...replace('r'), concurrencyKey: 'tenant' });
    const [first] = await lh.claim({ queue: 'limited', owner: 'w' });
    expect(first).toBeDefined();
    const fresh = await lh.enqueue('limited', { v: 2 }, { ...replace('r'), concurrencyKey: 'tenant' });
    const { rows } = await pool.query(`SELECT running FROM "${lh.schema}".concurrency_keys`);
    expect(rows).toEqual([{ running: 0 }]);
    const [next] = await lh.claim({ queue: 'limited', owner: 'w' });
    expect(next?.jobId).toBe(fresh.id);
  });
});

describe('dedupe and the rest of enqueue', () => {
  it('typed tasks take dedupe too', async () => {
    const lh = await migratedClient();
    const notify = defineTask('notify-user', {
      schema: z.object({ user: z.string() }),
      handler: async () => {},
    });
    const first = await lh.enqueue(
      notify,
      { user: 'ada' },
      { dedupe: { key: 'ada', mode: 'debounce', windowMs: 1000 } },
    );
    const again = await lh.enqueue(
      notify,
      { user: 'ada!' },
      { dedupe: { key: 'ada', mode: 'debounce', windowMs: 1000 } },
    );
    expect(again).toEqual({ id: first.id, created: false });
    expect((await lh.getJob(first.id))?.payload).toEqual({ user: 'ada!' });
    const many = await lh.enqueueMany(notify, [
      { payload: { user: 'bob' }, dedupe: { key: 'bob', mode: 'throttle', windowMs: 1000 } },
      { payload: { user: 'bob' }, dedupe: { key: 'bob', mode: 'throttle', windowMs: 1000 } },
    ]);
    expect(many.ids[0]).toBe(many.ids[1]);
  });

  it("retention removes a pruned job's dedupe key, but keeps an open throttle window", async () => {
    const lh = await migratedClient();
    const pool = testPool();
    for (const dedupe of [debounce('d', 1), throttle('t'), throttle('t-ended')]) {
      await lh.enqueue('kept', {}, dedupe);
      const [lease] = await waitFor(async () => {
        const leases = await lh.claim({ queue: 'kept', owner: 'w' });
        return leases.length > 0 ? leases : null;
      });
      expect(await lh.complete(lease!)).toBe(true);
    }
    await endDedupeWindows(pool, lh.schema, ['t-ended']);
    await finishedSince(pool, lh.schema, 7_200_000, { succeeded: true });
    expect(await lh.prune()).toMatchObject({ succeeded: 3 });
    const { rows } = await pool.query(`SELECT dedupe_key FROM "${lh.schema}".dedupe_keys`);
    expect(rows).toEqual([{ dedupe_key: 't' }]);
    // The open window still holds: the pruned job's id comes back, no second job.
    expect((await lh.enqueue('kept', {}, throttle('t'))).created).toBe(false);
    expect((await lh.enqueue('kept', {}, debounce('d', 60_000))).created).toBe(true);
  });

  it('deduped jobs are announced like plain ones: an idle worker that never polls runs them all', async () => {
    const lh = await migratedClient(listenOptions());
    const pool = testPool();
    const worker = lh.worker({
      queues: { announced: { concurrency: 8, handler: async () => {} } },
      pollIntervalMs: 3_600_000,
      recoveryIntervalMs: 0,
    });
    await started(worker);
    try {
      await waitFor(() => worker.listenerPid !== null, { what: 'listener' });
      // Autocommit bursts (wake-ups coalesced), then one inside a caller's transaction.
      await Promise.all(
        Array.from({ length: 30 }, (_, i) => lh.enqueue('announced', { i }, replace(`r${i}`))),
      );
      await Promise.all(
        Array.from({ length: 10 }, (_, i) => lh.enqueue('announced', { i }, throttle(`t${i}`))),
      );
      const client = new pg.Client({ connectionString: databaseUrl() });
      await client.connect();
      try {
        await client.query('BEGIN');
        await lh.enqueue('announced', {}, { client, ...replace('in-tx') });
        await client.query('COMMIT');
      } finally {
        await client.end();
      }
      await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 41, {
        timeoutMs: 5000,
        what: 'every deduped job run on notifications alone',
      });
    } finally {
      await worker.stop();
    }
  });

  it('plain enqueues write no dedupe key and no dedupe event', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueue('plain', {});
    await lh.enqueue('plain', {}, { orderingKey: 'o' });
    const many = await lh.enqueueMany('plain', [{ payload: 1 }, { payload: 2 }]);
    expect(many).toEqual({ ids: expect.any(Array) });
    const { rows } = await pool.query(
      `SELECT (SELECT count(*) FROM "${lh.schema}".dedupe_keys)::int AS keys,
              (SELECT count(*) FROM "${lh.schema}".job_events)::int AS events`,
    );
    expect(rows[0]).toEqual({ keys: 0, events: 0 });
  });

  it('bad dedupe options are ValidationErrors naming the field, and nothing is written', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const cases: [unknown, string][] = [
      [{ dedupe: 'k' }, 'options.dedupe'],
      [{ dedupe: { mode: 'throttle', windowMs: 10 } }, 'options.dedupe.key'],
      [{ dedupe: { key: '', mode: 'throttle', windowMs: 10 } }, 'options.dedupe.key'],
      [{ dedupe: { key: 'k'.repeat(201), mode: 'throttle', windowMs: 10 } }, 'options.dedupe.key'],
      [{ dedupe: { key: '   ', mode: 'throttle', windowMs: 10 } }, 'options.dedupe.key'],
      [{ dedupe: { key: 'a\u0000b', mode: 'throttle', windowMs: 10 } }, 'options.dedupe.key'],
      [{ dedupe: { key: 'a\ud800b', mode: 'throttle', windowMs: 10 } }, 'options.dedupe.key'],
      [{ dedupe: { key: 'k', mode: 'debouce', windowMs: 10 } }, 'options.dedupe.mode'],
      [{ dedupe: { key: 'k', mode: 'throttle' } }, 'options.dedupe.windowMs'],
      [{ dedupe: { key: 'k', mode: 'debounce', windowMs: 0 } }, 'options.dedupe.windowMs'],
      [{ dedupe: { key: 'k', mode: 'debounce', windowMs: 1.5 } }, 'options.dedupe.windowMs'],
      [{ dedupe: { key: 'k', mode: 'debounce', windowMs: 367 * 86_400_000 } }, 'options.dedupe.windowMs'],
      [{ dedupe: { key: 'k', mode: 'replace', windowMs: 10 } }, 'options.dedupe.windowMs'],
      [{ dedupe: { key: 'k', mode: 'debounce', windowMs: 10 }, delayMs: 5 }, 'options.delayMs'],
      [{ dedupe: { key: 'k', mode: 'debounce', windowMs: 10 }, runAt: new Date() }, 'options.runAt'],
      [
        { dedupe: { key: 'k', mode: 'throttle', windowMs: 10 }, idempotencyKey: 'k' },
        'options.idempotencyKey',
      ],
      [{ dedupe: { key: 'k', mode: 'throttle', windowMs: 10, widowMs: 3 } }, 'options.dedupe.widowMs'],
    ];
    for (const [options, field] of cases) {
      const err = await rejection(lh.enqueue('v', {}, options as EnqueueOptions));
      expect(err, JSON.stringify(options)).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).field).toBe(field);
    }
    const batchErr = await rejection(
      lh.enqueueMany('v', [
        { payload: 1, dedupe: { key: 'k', mode: 'throttle', windowMs: 10 } },
        { payload: 2, dedupe: { key: 'k', mode: 'debounce', windowMs: 10 } },
      ]),
    );
    expect((batchErr as ValidationError).field).toBe('items[1].dedupe');
    const { rows } = await pool.query(
      `SELECT (SELECT count(*) FROM "${lh.schema}".jobs)::int AS jobs,
              (SELECT count(*) FROM "${lh.schema}".dedupe_keys)::int AS keys`,
    );
    expect(rows[0]).toEqual({ jobs: 0, keys: 0 });
  });
});
