import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { type DedupeOptions, type Leasehold, ValidationError } from '../../src/index.js';
import { closeAfterTest, countByStatus, databaseUrl, migratedClient, testPool } from '../support/db.js';
import { dedupeEvents } from '../support/dedupe.js';
import { rejection } from '../support/hostile.js';

const MODES: DedupeOptions[] = [
  { key: 'the-one', mode: 'throttle', windowMs: 60_000 },
  { key: 'the-one', mode: 'debounce', windowMs: 60_000 },
  { key: 'the-one', mode: 'replace' },
];

// The job row's last writer and the last `deduplicated` event's writer: the same transaction when
// the payload left on the job is the one of the last enqueue to commit.
async function lastWriters(pool: pg.Pool, schema: string, jobId: string) {
  const { rows } = await pool.query(
    `SELECT (SELECT xmin::text FROM "${schema}".jobs WHERE id = $1) AS job,
            (SELECT xmin::text FROM "${schema}".job_events WHERE kind = 'deduplicated' ORDER BY id DESC LIMIT 1) AS event`,
    [jobId],
  );
  return rows[0] as { job: string; event: string };
}

// Opens every connection of the client's pool first, so that the callers' statements really
// overlap (a statement that began before another's commit answers `stale` and is run again).
async function warm(lh: Leasehold, connections: number): Promise<void> {
  await Promise.all(Array.from({ length: connections }, () => lh.pool.query('SELECT pg_sleep(0.05)')));
}

async function transactionClients(n: number): Promise<pg.Client[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const client = new pg.Client({ connectionString: databaseUrl() });
      await client.connect();
      return client;
    }),
  );
}

describe('dedupe under 100 concurrent callers with one key', () => {
  for (const dedupe of MODES) {
    it(`${dedupe.mode}: exactly one job, every caller gets its id, each collapsed enqueue recorded once`, async () => {
      const lh = closeAfterTest(await migratedClient({ poolSize: 25 }));
      const pool = testPool();
      await warm(lh, 25);
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, caller) => lh.enqueue('race', { caller }, { dedupe })),
      );
      const { rows } = await pool.query(`SELECT id::text, payload FROM "${lh.schema}".jobs`);
      expect(rows).toHaveLength(1);
      expect(new Set(results.map((r) => r.id))).toEqual(new Set([rows[0].id]));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      const events = await dedupeEvents(pool, lh.schema);
      expect(events).toHaveLength(99);
      expect(new Set(events.map((e) => e.jobId))).toEqual(new Set([rows[0].id]));
      const creator = results.findIndex((r) => r.created);
      if (dedupe.mode === 'throttle') {
        // The first to commit made the job; nothing rewrote it.
        expect(rows[0].payload).toEqual({ caller: creator });
      } else {
        // The last enqueue to commit wrote the payload left on the job.
        const writers = await lastWriters(pool, lh.schema, rows[0].id);
        expect(writers.job).toBe(writers.event);
        expect(rows[0].payload.caller).not.toBe(creator);
      }
    });
  }

  it('replace while the job runs: one cancellation, one new job, the other 99 fold into it', async () => {
    const lh = closeAfterTest(await migratedClient({ poolSize: 25 }));
    const pool = testPool();
    const old = await lh.enqueue('race', { caller: -1 }, { dedupe: { key: 'k', mode: 'replace' } });
    const [lease] = await lh.claim({ queue: 'race', owner: 'old' });
    await warm(lh, 25);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, caller) =>
        lh.enqueue('race', { caller }, { dedupe: { key: 'k', mode: 'replace' } }),
      ),
    );
    expect(results.filter((r) => r.cancelledJobId === old.id)).toHaveLength(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
    expect(await countByStatus(pool, lh.schema)).toEqual({ cancelled: 1, pending: 1 });
    expect(await lh.complete(lease!)).toBe(false);
  });

  it('debounce while the job runs: the running job untouched, one new pending job', async () => {
    const lh = closeAfterTest(await migratedClient({ poolSize: 25 }));
    const pool = testPool();
    const dedupe: DedupeOptions = { key: 'k', mode: 'debounce', windowMs: 1 };
    const old = await lh.enqueue('race', { caller: -1 }, { dedupe });
    const [lease] = await lh.claim({ queue: 'race', owner: 'w' });
    expect(lease?.jobId).toBe(old.id);
    await warm(lh, 25);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, caller) => lh.enqueue('race', { caller }, { dedupe })),
    );
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
    expect(await countByStatus(pool, lh.schema)).toEqual({ running: 1, pending: 1 });
    expect((await lh.getJob(old.id))?.payload).toEqual({ caller: -1 });
    expect(await lh.complete(lease!)).toBe(true);
  });
});

describe('dedupe inside callers’ transactions', () => {
  for (const mode of ['debounce', 'replace'] as const) {
    it(`${mode}: of ten transactions on one key, the last to commit leaves its payload`, async () => {
      const lh = closeAfterTest(await migratedClient());
      const pool = testPool();
      const dedupe: DedupeOptions =
        mode === 'replace' ? { key: 'k', mode } : { key: 'k', mode, windowMs: 60_000 };
      const clients = await transactionClients(10);
      try {
        await Promise.all(clients.map((client) => client.query('BEGIN')));
        // Each enqueue waits for the key until the transaction holding it ends; commit them in the
        // order they get through, and remember the last. The first to go through a new key
        // commits after the others' statements began: they answer `stale` and are run again.
        const waiting = new Map(
          clients.map((client, i) => [i, lh.enqueue('tx', { from: i }, { client, dedupe }).then(() => i)]),
        );
        let last = -1;
        while (waiting.size > 0) {
          last = await Promise.race(waiting.values());
          waiting.delete(last);
          await (clients[last] as pg.Client).query('COMMIT');
        }
        const { rows } = await pool.query(`SELECT payload FROM "${lh.schema}".jobs`);
        expect(rows).toEqual([{ payload: { from: last } }]);
        expect(await dedupeEvents(pool, lh.schema)).toHaveLength(9);
      } finally {
        await Promise.all(clients.map((client) => client.end()));
      }
    });
  }

  it('a rollback undoes a collapse, a new window and a replacement', async () => {
    const lh = closeAfterTest(await migratedClient());
    const pool = testPool();
    const [client] = await transactionClients(1);
    try {
      const debounced = await lh.enqueue(
        'tx',
        { v: 1 },
        { dedupe: { key: 'd', mode: 'debounce', windowMs: 60_000 } },
      );
      const before = await lh.getJob(debounced.id);
      await client!.query('BEGIN');
      await lh.enqueue('tx', { v: 2 }, { client, dedupe: { key: 'd', mode: 'debounce', windowMs: 1 } });
      await client!.query('ROLLBACK');
      expect(await lh.getJob(debounced.id)).toEqual(before);

      await client!.query('BEGIN');
      const throttled = await lh.enqueue(
        'tx',
        {},
        { client, dedupe: { key: 't', mode: 'throttle', windowMs: 60_000 } },
      );
      await client!.query('ROLLBACK');
      expect(await lh.getJob(throttled.id)).toBeNull();
      expect(
        (await lh.enqueue('tx', {}, { dedupe: { key: 't', mode: 'throttle', windowMs: 60_000 } })).created,
      ).toBe(true);

      const old = await lh.enqueue('runs', { v: 1 }, { dedupe: { key: 'r', mode: 'replace' } });
      const [lease] = await lh.claim({ queue: 'runs', owner: 'w' });
      await client!.query('BEGIN');
      const replaced = await lh.enqueue('runs', { v: 2 }, { client, dedupe: { key: 'r', mode: 'replace' } });
      expect(replaced.cancelledJobId).toBe(old.id);
      await client!.query('ROLLBACK');
      expect(await lh.complete(lease!)).toBe(true);
      expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 2, succeeded: 1 });
      expect(await dedupeEvents(pool, lh.schema)).toEqual([]);
    } finally {
      await client!.end();
    }
  });
});

describe('dedupe in enqueueMany', () => {
  it('folds duplicate keys inside a batch (throttle keeps the first, debounce and replace the last) and beside plain items', async () => {
    const lh = closeAfterTest(await migratedClient());
    const pool = testPool();
    const d: DedupeOptions = { key: 'd', mode: 'debounce', windowMs: 60_000 };
    const t: DedupeOptions = { key: 't', mode: 'throttle', windowMs: 60_000 };
    const r: DedupeOptions = { key: 'r', mode: 'replace' };
    const batch = await lh.enqueueMany('b', [
      { payload: 'plain' },
      { payload: 'd1', dedupe: d },
      { payload: 't1', dedupe: t },
      { payload: 'd2', dedupe: d },
      { payload: 't2', dedupe: t },
      { payload: 'r1', dedupe: r },
      { payload: 'r2', dedupe: r },
      { payload: 'd3', dedupe: d },
    ]);
    const [plain, d1, t1, d2, t2, r1, r2, d3] = batch.ids;
    expect([d1, d2].every((id) => id === d3)).toBe(true);
    expect(t2).toBe(t1);
    expect(r1).toBe(r2);
    expect(new Set([plain, d3, t1, r2]).size).toBe(4);
    expect(batch.created).toEqual([true, false, true, false, false, false, true, true]);
    const payloads = async (ids: (string | undefined)[]) =>
      Promise.all(ids.map(async (id) => (await lh.getJob(id as string))?.payload));
    expect(await payloads([plain, d3, t1, r2])).toEqual(['plain', 'd3', 't1', 'r2']);
    const events = await dedupeEvents(pool, lh.schema);
    expect(events.filter((e) => e.jobId === d3)).toHaveLength(2);
    expect(events.filter((e) => e.jobId === t1)).toHaveLength(1);
    expect(events.filter((e) => e.jobId === r2)).toHaveLength(1);

    // A later batch folds into the jobs its keys name.
    const again = await lh.enqueueMany('b', [
      { payload: 'd4', dedupe: d },
      { payload: 'new', dedupe: { key: 'n', mode: 'replace' } },
    ]);
    expect(again.ids[0]).toBe(d3);
    expect(again.created).toEqual([false, true]);
    expect(await payloads([d3])).toEqual(['d4']);
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 5 });
  });

  it('concurrent batches sharing keys make one job per key; a rolled-back batch leaves nothing', async () => {
    const lh = closeAfterTest(await migratedClient({ poolSize: 10 }));
    const pool = testPool();
    const items = (n: number) => [
      { payload: { n }, dedupe: { key: 'a', mode: 'debounce', windowMs: 60_000 } as DedupeOptions },
      { payload: { n }, dedupe: { key: 'b', mode: 'replace' } as DedupeOptions },
      { payload: { n }, dedupe: { key: 'c', mode: 'throttle', windowMs: 60_000 } as DedupeOptions },
    ];
    const results = await Promise.all(Array.from({ length: 20 }, (_, n) => lh.enqueueMany('many', items(n))));
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 3 });
    for (const column of [0, 1, 2]) {
      expect(new Set(results.map((r) => r.ids[column])).size).toBe(1);
      expect(results.filter((r) => r.created?.[column])).toHaveLength(1);
    }
    expect(await dedupeEvents(pool, lh.schema)).toHaveLength(3 * 19);

    const [client] = await transactionClients(1);
    try {
      await client!.query('BEGIN');
      await lh.enqueueMany('many', [...items(99), { payload: 'plain' }], { client });
      await client!.query('ROLLBACK');
    } finally {
      await client!.end();
    }
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 3 });
    expect(await dedupeEvents(pool, lh.schema)).toHaveLength(3 * 19);
  });
});

describe('dedupe with ordering keys', () => {
  async function orderingRow(lh: Leasehold, pool: pg.Pool, key: string) {
    const { rows } = await pool.query(
      `SELECT head_id::text, waiting FROM "${lh.schema}".ordering_keys WHERE queue_name = 'o' AND ordering_key = $1`,
      [key],
    );
    return rows[0];
  }

  it('a debounced job waiting behind its key keeps its place and is released by the head', async () => {
    const lh = closeAfterTest(await migratedClient());
    const pool = testPool();
    const head = await lh.enqueue('o', 'head', { orderingKey: 'acct' });
    const dedupe: DedupeOptions = { key: 'd', mode: 'debounce', windowMs: 1 };
    const first = await lh.enqueue('o', 'v1', { orderingKey: 'acct', dedupe });
    expect(await lh.enqueue('o', 'v2', { orderingKey: 'acct', dedupe })).toEqual({
      id: first.id,
      created: false,
    });
    expect(await orderingRow(lh, pool, 'acct')).toEqual({ head_id: head.id, waiting: 1 });
    const [headLease] = await lh.claim({ queue: 'o', owner: 'w', limit: 10 });
    expect(headLease?.jobId).toBe(head.id);
    expect(await lh.claim({ queue: 'o', owner: 'w' })).toEqual([]);
    expect(await lh.complete(headLease!)).toBe(true);
    const [next] = await lh.claim({ queue: 'o', owner: 'w' });
    expect(next).toMatchObject({ jobId: first.id, payload: 'v2' });
  });

  it('a replaced running head hands its place to its replacement; the jobs behind it keep waiting', async () => {
    const lh = closeAfterTest(await migratedClient());
    const pool = testPool();
    const dedupe: DedupeOptions = { key: 'r', mode: 'replace' };
    const old = await lh.enqueue('o', 'v1', { orderingKey: 'acct', dedupe });
    const behind = await lh.enqueue('o', 'behind', { orderingKey: 'acct' });
    const [stale] = await lh.claim({ queue: 'o', owner: 'w', limit: 10 });
    expect(stale?.jobId).toBe(old.id);
    const fresh = await lh.enqueue('o', 'v2', { orderingKey: 'acct', dedupe });
    expect(fresh.cancelledJobId).toBe(old.id);
    expect(await orderingRow(lh, pool, 'acct')).toEqual({ head_id: fresh.id, waiting: 1 });
    expect(await lh.complete(stale!)).toBe(false);
    const [lease] = await lh.claim({ queue: 'o', owner: 'w', limit: 10 });
    expect(lease).toMatchObject({ jobId: fresh.id, payload: 'v2' });
    expect(await lh.complete(lease!)).toBe(true);
    const [last] = await lh.claim({ queue: 'o', owner: 'w', limit: 10 });
    expect(last?.jobId).toBe(behind.id);
    expect(await lh.complete(last!)).toBe(true);
    expect(await lh.claim({ queue: 'o', owner: 'w' })).toEqual([]);
  });

  it('a dedupe key whose job has another ordering key is a ValidationError, nothing written', async () => {
    const lh = closeAfterTest(await migratedClient());
    const pool = testPool();
    const dedupe: DedupeOptions = { key: 'r', mode: 'replace' };
    const { id } = await lh.enqueue('o', 'v1', { orderingKey: 'acct', dedupe });
    const err = await rejection(lh.enqueue('o', 'v2', { orderingKey: 'other', dedupe }));
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).field).toBe('options.orderingKey');
    expect((await lh.getJob(id))?.payload).toBe('v1');
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 1 });
    expect(await dedupeEvents(pool, lh.schema)).toEqual([]);
  });
});
