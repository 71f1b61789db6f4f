import type pg from 'pg';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/index.js';
import { createStatsMetrics } from '../../src/prometheus.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';

type Client = Awaited<ReturnType<typeof migratedClient>>;

/** Payloads of the schema's jobs, by id. */
async function payloads(pool: pg.Pool, schema: string): Promise<Map<string, unknown>> {
  const { rows } = await pool.query(`SELECT id::text, payload FROM "${schema}".jobs`);
  return new Map(rows.map((row) => [row.id as string, row.payload]));
}

/**
 * Holds a SHARE lock on the schema's jobs table in a transaction of its own, so every enqueue
 * statement waits on it: the statement in flight stays in flight, and later calls queue behind it.
 */
async function holdJobs(pool: pg.Pool, schema: string): Promise<{ release(): Promise<void> }> {
  const locker = await pool.connect();
  await locker.query('BEGIN');
  await locker.query(`LOCK TABLE "${schema}".jobs IN SHARE MODE`);
  return {
    async release() {
      await locker.query('COMMIT');
      locker.release();
    },
  };
}

/** The backends of this schema's statements waiting on a lock, with their statement text. */
async function waitingStatements(pool: pg.Pool, schema: string): Promise<{ pid: number; query: string }[]> {
  const { rows } = await pool.query(
    `SELECT pid, query FROM pg_stat_activity
     WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%' AND query NOT LIKE '%pg_stat_activity%'`,
    [`"${schema}".jobs`],
  );
  return rows as { pid: number; query: string }[];
}

/** Settles every promise, keeping which were fulfilled and which rejected. */
function settle<T>(promises: Promise<T>[]): Promise<PromiseSettledResult<T>[]> {
  return Promise.allSettled(promises);
}

/** Waits until `waiting` calls wait in the combiner's lines. */
async function queued(lh: Client, waiting: number): Promise<void> {
  await waitFor(() => lh.combinedEnqueues().waiting === waiting, { what: `${waiting} calls waiting` });
}

describe('write combining of enqueues', () => {
  it('1,000 concurrent enqueues share statements, and each caller gets the distinct id of its own row', async () => {
    const lh = await migratedClient({ poolSize: 4 });
    const pool = testPool(2);
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        lh.enqueue('combined', { i }, i % 3 === 0 ? { priority: i % 5 } : undefined),
      ),
    );
    const stored = await payloads(pool, lh.schema);
    expect(stored.size).toBe(1000);
    expect(new Set(results.map((r) => r.id)).size).toBe(1000);
    results.forEach((result, i) => {
      expect(result.created).toBe(true);
      expect(stored.get(result.id)).toEqual({ i });
    });
    const counts = lh.combinedEnqueues();
    expect(counts.rows).toBe(1000);
    expect(counts.combinedStatements).toBeGreaterThan(0);
    expect(counts.statements).toBeLessThan(1000);
    expect(counts.largestStatement).toBeGreaterThan(1);
    // The metrics export the same counts.
    const text = await createStatsMetrics(lh, { registry: new Registry() }).metrics();
    expect(text).toMatch(new RegExp(`^leasehold_enqueue_statements_total ${counts.statements}$`, 'm'));
    expect(text).toMatch(
      new RegExp(`^leasehold_enqueue_combined_statements_total ${counts.combinedStatements}$`, 'm'),
    );
    expect(text).toMatch(/^leasehold_enqueue_statement_rows_total 1000$/m);
  });

  it('callers that come back while their statement is in flight all go in the next one', async () => {
    // 16 callers enqueueing one job after another: the first call goes alone, the other 15 wait
    // for it; from then on each statement answers 16 callers who come back before the next starts.
    const lh = await migratedClient({ poolSize: 16 });
    const pool = testPool(2);
    const ids = await Promise.all(
      Array.from({ length: 16 }, async (_, caller) => {
        const mine: string[] = [];
        for (let i = 0; i < 20; i++) mine.push((await lh.enqueue('loops', { caller, i })).id);
        return mine;
      }),
    );
    const stored = await payloads(pool, lh.schema);
    expect(stored.size).toBe(320);
    for (const [caller, mine] of ids.entries()) {
      for (const [i, id] of mine.entries()) expect(stored.get(id)).toEqual({ caller, i });
    }
    const counts = lh.combinedEnqueues();
    expect(counts).toMatchObject({ rows: 320, largestStatement: 16, waiting: 0 });
    expect(counts.statements).toBeLessThanOrEqual(21);
  });

  it("a statement in flight holds up only its own group's calls", async () => {
    // One statement per group: a keyed insert waiting on a row lock (the same key, held by an open
    // transaction) does not stop plain enqueues of the same client.
    const lh = await migratedClient({ poolSize: 8 });
    const pool = testPool(2);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await lh.enqueue('groups', { holder: true }, { idempotencyKey: 'held', client: holder });
      const blocked = lh.enqueue('groups', { blocked: true }, { idempotencyKey: 'held' });
      await waitFor(async () => (await waitingStatements(pool, lh.schema)).length === 1, {
        what: 'the keyed statement to wait on the open transaction',
      });
      const plain = await Promise.all([1, 2, 3].map((i) => lh.enqueue('groups', { i })));
      expect(new Set(plain.map((r) => r.id)).size).toBe(3);
      expect((await waitingStatements(pool, lh.schema)).length).toBe(1);
      await holder.query('COMMIT');
      const answer = await blocked;
      expect(answer.created).toBe(false);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
    }
  });

  it('a call that finds nothing in flight is sent at once, alone', async () => {
    const lh = await migratedClient({ poolSize: 4 });
    for (let i = 0; i < 5; i++) await lh.enqueue('alone', { i });
    expect(lh.combinedEnqueues()).toEqual({
      statements: 5,
      combinedStatements: 0,
      rows: 5,
      largestStatement: 1,
      waiting: 0,
    });
  });

  it('a connection killed mid-statement rejects exactly the callers of that statement, and none of their rows exists', async () => {
    // Two connections: one combined statement in flight at a time.
    const lh = await migratedClient({ poolSize: 2 });
    const pool = testPool(3);
    const lock = await holdJobs(pool, lh.schema);
    let released = false;
    try {
      const first = lh.enqueue('killed', { caller: 'first' });
      // Observed from the start: its rejection may come before the line that awaits it.
      const firstRefused = expect(first).rejects.toThrow();
      await waitFor(async () => (await waitingStatements(pool, lh.schema)).length === 1, {
        what: 'the first statement to wait on the lock',
      });
      const carried = ['b', 'c', 'd'].map((caller) => lh.enqueue('killed', { caller }));
      const carriedOutcomes = settle(carried);
      await queued(lh, 3);
      // The first statement dies: only its caller fails; the queued three go together next.
      const [alone] = await waitingStatements(pool, lh.schema);
      await pool.query('SELECT pg_terminate_backend($1)', [alone?.pid]);
      await firstRefused;
      const combined = await waitFor(
        async () => (await waitingStatements(pool, lh.schema)).find((s) => s.pid !== alone?.pid),
        { what: 'the combined statement to wait on the lock' },
      );
      expect(lh.combinedEnqueues()).toMatchObject({ statements: 2, combinedStatements: 1, rows: 4 });
      const later = lh.enqueue('killed', { caller: 'later' });
      await queued(lh, 1);
      await pool.query('SELECT pg_terminate_backend($1)', [combined.pid]);
      const outcomes = await carriedOutcomes;
      expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
      // One statement, one error: every caller it carried gets the same one.
      const errors = outcomes.map((o) => (o as PromiseRejectedResult).reason);
      expect(new Set(errors).size).toBe(1);
      await lock.release();
      released = true;
      const { id } = await later;
      const stored = await payloads(pool, lh.schema);
      expect([...stored.entries()]).toEqual([[id, { caller: 'later' }]]);
    } finally {
      if (!released) await lock.release();
    }
  });

  it('duplicate idempotency keys among combined calls give each caller the one job of its key', async () => {
    const lh = await migratedClient({ poolSize: 2 });
    const pool = testPool(3);
    const lock = await holdJobs(pool, lh.schema);
    let calls: Promise<{ id: string; created: boolean }>[] = [];
    let front: Promise<{ id: string; created: boolean }> | undefined;
    try {
      front = lh.enqueue('keyed', { front: true }, { idempotencyKey: 'front' });
      await waitFor(() => lh.combinedEnqueues().statements === 1, { what: 'the first statement' });
      calls = Array.from({ length: 12 }, (_, i) =>
        lh.enqueue('keyed', { i }, { idempotencyKey: i % 3 === 0 ? 'a' : i % 3 === 1 ? 'b' : `own-${i}` }),
      );
      await queued(lh, 12);
    } finally {
      await lock.release();
    }
    const results = await Promise.all(calls);
    expect((await front)?.created).toBe(true);
    expect(lh.combinedEnqueues().combinedStatements).toBeGreaterThan(0);
    const stored = await payloads(pool, lh.schema);
    // One job per key: front, a, b and the four own keys.
    expect(stored.size).toBe(7);
    for (const key of ['a', 'b']) {
      const mine = results.filter((_, i) => (i % 3 === 0 ? 'a' : i % 3 === 1 ? 'b' : 'own') === key);
      expect(new Set(mine.map((r) => r.id)).size).toBe(1);
      expect(mine.filter((r) => r.created)).toHaveLength(1);
      // The job holds the payload of the first caller of its key.
      expect(stored.get(mine[0]?.id as string)).toEqual({ i: key === 'a' ? 0 : 1 });
    }
    const own = results.filter((_, i) => i % 3 === 2);
    expect(own.every((r) => r.created)).toBe(true);
    expect(new Set(own.map((r) => r.id)).size).toBe(4);
    // A later call with a taken key finds the job, as without combining.
    const again = await lh.enqueue('keyed', { late: true }, { idempotencyKey: 'a' });
    expect(again).toEqual({ id: results[0]?.id, created: false });
  });

  it("a caller's invalid payload fails alone, before it joins a statement", async () => {
    const lh = await migratedClient({ poolSize: 2, maxPayloadBytes: 100 });
    const pool = testPool(2);
    const calls = Array.from({ length: 50 }, (_, i) =>
      lh.enqueue('mixed', i === 17 ? { big: 'x'.repeat(200) } : { i }),
    );
    const outcomes = await settle(calls);
    const rejected = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [[i, o.reason]] : []));
    expect(rejected).toHaveLength(1);
    expect(rejected[0]?.[0]).toBe(17);
    expect(rejected[0]?.[1]).toBeInstanceOf(ValidationError);
    expect((await payloads(pool, lh.schema)).size).toBe(49);
    expect(lh.combinedEnqueues().rows).toBe(49);
  });

  it("calls with client are never combined: their rows roll back with the caller's transaction", async () => {
    const lh = await migratedClient({ poolSize: 4 });
    const pool = testPool(3);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const inside = lh.enqueue('tx', { inside: true }, { client });
      const outside = Array.from({ length: 20 }, (_, i) => lh.enqueue('tx', { i }));
      const [mine, ...theirs] = await Promise.all([inside, ...outside]);
      await client.query('ROLLBACK');
      const stored = await payloads(pool, lh.schema);
      expect(stored.has(mine?.id as string)).toBe(false);
      expect(theirs.every((r) => stored.has(r.id))).toBe(true);
      expect(stored.size).toBe(20);
      expect(lh.combinedEnqueues().rows).toBe(20);
    } finally {
      client.release();
    }
  });

  it('combineEnqueues: false sends one statement per call and counts nothing', async () => {
    const lh = await migratedClient({ poolSize: 4, combineEnqueues: false });
    const pool = testPool(2);
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => lh.enqueue('single', { i })));
    expect((await payloads(pool, lh.schema)).size).toBe(30);
    expect(new Set(results.map((r) => r.id)).size).toBe(30);
    expect(lh.combinedEnqueues()).toEqual({
      statements: 0,
      combinedStatements: 0,
      rows: 0,
      largestStatement: 0,
      waiting: 0,
    });
    await expect(migratedClient({ combineEnqueues: 'yes' as unknown as boolean })).rejects.toThrow(
      ValidationError,
    );
  });
});
