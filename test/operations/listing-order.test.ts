import fc from 'fast-check';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Leasehold } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';
import { runs } from '../support/hostile.js';

// Every listing the library offers, paged through with ids on both sides of a power of ten and
// ties on every timestamp: each item must come exactly once, in the documented order. Ids are
// bigints carried as text, so anything that sorts or compares the text (10 before 9) shows here.

const noBackoff = { baseMs: 0, maxMs: 0 };

/** Moves the identity sequences so the next ids are `jobFrom` and `eventFrom`. */
async function startIdsAt(pool: pg.Pool, schema: string, jobFrom: bigint, eventFrom: bigint): Promise<void> {
  await pool.query(
    `SELECT setval(pg_get_serial_sequence('"${schema}".jobs', 'id'), $1::bigint, false),
            setval(pg_get_serial_sequence('"${schema}".job_events', 'id'), $2::bigint, false)`,
    [jobFrom.toString(), eventFrom.toString()],
  );
}

/** Empties every table, so each run starts from nothing (ids only grow: the sequences stay). */
async function emptySchema(pool: pg.Pool, schema: string): Promise<void> {
  const tables = [
    'jobs',
    'finished_jobs',
    'lease_refusals',
    'job_events',
    'queues',
    'job_keys',
    'job_effects',
    'ordering_keys',
    'concurrency_keys',
  ];
  await pool.query(`TRUNCATE ${tables.map((t) => `"${schema}".${t}`).join(', ')}`);
}

/** Claims every job of `queue` and fails each once (each fail is its own statement). */
async function failAll(lh: Leasehold, queue: string, code: string): Promise<void> {
  for (;;) {
    const leases = await lh.claim({ queue, owner: 'prop', limit: 100 });
    if (leases.length === 0) return;
    for (const lease of leases) await lh.fail(lease, new Error('no'), { code });
  }
}

const byBigint = (a: string, b: string) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0);

function expectOnceEach(listed: readonly string[], expected: readonly string[]): void {
  expect(new Set(listed).size).toBe(listed.length);
  expect([...listed].sort(byBigint)).toEqual([...expected].sort(byBigint));
}

describe('listings page through every item exactly once, in order', () => {
  it('a job whose event ids cross a power of ten reads its history oldest first', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool(2);
    await startIdsAt(pool, lh.schema, 1n, 6n);
    const { id } = await lh.enqueue('crossing', {}, { maxAttempts: 8 });
    for (let attempt = 0; attempt < 7; attempt++) {
      const [lease] = await lh.claim({ queue: 'crossing', owner: 'w' });
      await lh.fail(lease!, new Error('again'), { code: 'AGAIN' });
    }
    const job = await lh.getJob(id, { history: true });
    const recorded = job!.history.filter((event) => event.eventId !== null);
    expect(recorded.map((event) => event.eventId)).toEqual(['6', '7', '8', '9', '10', '11', '12']);
    expect(recorded.map((event) => event.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it('thirty jobs dead in one statement page through listDead, every one once', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool(2);
    const { ids } = await lh.enqueueMany(
      'batch',
      Array.from({ length: 30 }, () => ({ payload: {}, maxAttempts: 1 })),
    );
    await failAll(lh, 'batch', 'BOOM');
    // One batch, one death time: the order rests on the id alone.
    await pool.query(`UPDATE "${lh.schema}".jobs SET finished_at = '2026-01-01T00:00:00Z'`);
    const listed: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await lh.listDead({ limit: 4, ...(cursor !== null && { cursor }) });
      listed.push(...page.jobs.map((job) => job.id));
      cursor = page.cursor;
    } while (cursor !== null);
    expect(listed).toEqual([...ids].sort(byBigint).reverse());
  });

  it('holds for every listing, whatever the ids and the ties (property)', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool(2);
    const tieBase = '2026-02-03T04:05:06.123456Z';
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          power: fc.integer({ min: 1, max: 15 }),
          below: fc.integer({ min: 1, max: 12 }),
          // Per dead job: which of a few death times it gets (few values: many ties).
          deaths: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 2, maxLength: 24 }),
          keyed: fc.integer({ min: 1, max: 6 }),
          attempts: fc.integer({ min: 2, max: 9 }),
          pageSize: fc.integer({ min: 1, max: 5 }),
          batchSize: fc.integer({ min: 1, max: 5 }),
        }),
        async ({ power, below, deaths, keyed, attempts, pageSize, batchSize }) => {
          await emptySchema(pool, lh.schema);
          // Ids only grow across runs (the runs share the sequences): start at the power of ten
          // below, or just past the ids used so far.
          const { rows } = await pool.query<{ jobs: string; events: string }>(
            `SELECT (SELECT last_value FROM pg_sequences WHERE schemaname = $1 AND sequencename LIKE 'jobs_id%')::text AS jobs,
                    (SELECT last_value FROM pg_sequences WHERE schemaname = $1 AND sequencename LIKE 'job_events_id%')::text AS events`,
            [lh.schema],
          );
          const pivot = 10n ** BigInt(power);
          const from = (used: string | undefined) => {
            const wanted = pivot - BigInt(below);
            const floor = BigInt(used ?? '0') + 1n;
            return wanted > floor ? wanted : floor;
          };
          await startIdsAt(pool, lh.schema, from(rows[0]?.jobs), from(rows[0]?.events));

          // Dead jobs in two queues, tied on a few death times.
          const half = Math.ceil(deaths.length / 2);
          await lh.enqueueMany(
            'qa',
            Array.from({ length: half }, () => ({ payload: {}, maxAttempts: 1 })),
          );
          await lh.enqueueMany(
            'qb',
            Array.from({ length: deaths.length - half }, () => ({ payload: {}, maxAttempts: 1 })),
          );
          // Ordered jobs whose dead heads block their keys.
          for (let k = 0; k < keyed; k++) {
            await lh.enqueue('qk', {}, { maxAttempts: 1, orderingKey: `key${k}` });
          }
          await failAll(lh, 'qa', 'A');
          await failAll(lh, 'qb', 'B');
          await failAll(lh, 'qk', 'K');
          const { rows: dead } = await pool.query<{ id: string; queue_name: string }>(
            `SELECT id::text, queue_name FROM "${lh.schema}".jobs WHERE status = 'dead' ORDER BY id`,
          );
          await pool.query(
            `UPDATE "${lh.schema}".jobs AS j
             SET finished_at = $1::timestamptz + d.n * interval '1 microsecond', created_at = $1::timestamptz
             FROM unnest($2::bigint[], $3::int[]) AS d(id, n) WHERE j.id = d.id`,
            [tieBase, dead.map((row) => row.id), dead.map((_, i) => deaths[i % deaths.length])],
          );
          const deathOf = new Map(dead.map((row, i) => [row.id, deaths[i % deaths.length] as number]));
          // Newest death first, then the larger id first.
          const newestFirst = (a: string, b: string) =>
            (deathOf.get(b) as number) - (deathOf.get(a) as number) || byBigint(b, a);

          // listDead, all queues and one queue, paged.
          for (const queue of [undefined, 'qa']) {
            const listed: string[] = [];
            let cursor: string | null = null;
            do {
              const page = await lh.listDead({
                limit: pageSize,
                ...(queue !== undefined && { queue }),
                ...(cursor !== null && { cursor }),
              });
              listed.push(...page.jobs.map((job) => job.id));
              cursor = page.cursor;
            } while (cursor !== null);
            const expected = dead
              .filter((row) => queue === undefined || row.queue_name === queue)
              .map((row) => row.id)
              .sort(newestFirst);
            expect(listed).toEqual(expected);
          }

          // blockedKeys: longest blocked first (oldest death, then the smaller id).
          const blocked = await lh.blockedKeys({ limit: 1000 });
          const heads = dead.filter((row) => row.queue_name === 'qk').map((row) => row.id);
          expectOnceEach(
            blocked.map((key) => key.headJobId),
            heads,
          );
          expect(blocked.map((key) => key.headJobId)).toEqual([...heads].sort(newestFirst).reverse());

          // listQueues: every queue once, by name.
          const queues = await lh.listQueues({ limit: 1000 });
          expect(queues.map((queue) => queue.name)).toEqual(['qa', 'qb', 'qk']);

          // A job's history: recorded events once each, in id order, across the power of ten.
          const { id: busy } = await lh.enqueue('qh', {}, { maxAttempts: attempts });
          for (let i = 0; i < attempts; i++) {
            const [lease] = await lh.claim({ queue: 'qh', owner: 'w' });
            await lh.fail(lease!, new Error('again'), { code: 'AGAIN' });
          }
          await pool.query(`UPDATE "${lh.schema}".job_events SET at = $1 WHERE job_id = $2`, [tieBase, busy]);
          const { rows: events } = await pool.query<{ id: string }>(
            `SELECT id::text FROM "${lh.schema}".job_events WHERE job_id = $1`,
            [busy],
          );
          const history = (await lh.getJob(busy, { history: true }))!.history;
          const recorded = history.flatMap((event) => (event.eventId === null ? [] : [event.eventId]));
          expect(recorded).toEqual(events.map((row) => row.id).sort(byBigint));

          // A filter replay, in batches: every dead job of the queue replayed exactly once.
          const before = await lh.replay({ queue: 'qa' }, { reason: 'property', batchSize });
          const qa = dead.filter((row) => row.queue_name === 'qa').map((row) => row.id);
          expect(before.replayed).toBe(qa.length);
          const { rows: replayed } = await pool.query<{ job_id: string; n: number }>(
            `SELECT job_id::text, count(*)::int AS n FROM "${lh.schema}".job_events
             WHERE kind = 'replayed' GROUP BY job_id`,
          );
          expectOnceEach(
            replayed.map((row) => row.job_id),
            qa,
          );
          expect(replayed.every((row) => row.n === 1)).toBe(true);

          // An id-list replay across the power of ten answers with every id once, in id order.
          const qb = dead.filter((row) => row.queue_name === 'qb').map((row) => row.id);
          const listed = await lh.replay([...qb].reverse(), { reason: 'property' });
          expect(listed.ids).toEqual([...qb].sort(byBigint));
        },
      ),
      runs(15),
    );
  }, 120_000);
});
