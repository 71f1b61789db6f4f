import { afterAll, describe, expect, it } from 'vitest';
import { Leasehold, PermanentError } from '../../src/index.js';
import { loadMigrations, migrate } from '../../src/migrations/migrator.js';
import { databaseUrl, dropSchema, testPool, uniqueSchema, waitFor } from '../support/db.js';

// Migration 018 turns an existing jobs table into the cold lane of a partitioned one. It must do
// so online: workers keep claiming and completing, producers keep enqueuing, and nothing is lost,
// run twice, or given an id twice.

const schema = uniqueSchema('lh_lanes_mig');
const pool = testPool(4);
afterAll(() => dropSchema(schema));

describe('migrating to lanes (018) with work in flight', () => {
  it('loses nothing, runs each job once, keeps ids, leases and terminal jobs', async () => {
    await migrate(pool, schema, { upTo: 17 });
    const lh = new Leasehold({ connectionString: databaseUrl(), schema, poolSize: 8 });
    try {
      // What an installation holds before the upgrade: work, a dead job, a job due later, and a
      // lease held by a process that will complete it after the migration.
      const before = await lh.enqueueMany(
        'online',
        Array.from({ length: 1500 }, (_, i) => ({ payload: { i } })),
      );
      const { id: deadId } = await lh.enqueue('online-dead', { n: 1 }, { maxAttempts: 1 });
      const [doomed] = await lh.claim({ queue: 'online-dead', owner: 'before' });
      if (!doomed) throw new Error('no lease');
      await lh.fail(doomed, new PermanentError('gone', { code: 'GONE' }));
      const { id: laterId } = await lh.enqueue('online-later', { n: 1 }, { delayMs: 3_600_000 });
      await lh.enqueue('online-held', { n: 1 });
      const [held] = await lh.claim({ queue: 'online-held', owner: 'outsider', leaseMs: 120_000 });
      if (!held) throw new Error('no lease');
      const keptBefore = await pool.query(
        `SELECT to_jsonb(j) AS job FROM "${schema}".jobs AS j WHERE id = ANY ($1::bigint[]) ORDER BY id`,
        [[deadId, laterId, held.jobId]],
      );

      const runs = new Map<string, number>();
      const worker = lh.worker({
        queues: {
          online: {
            concurrency: 8,
            handler: async (job) => {
              runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
              await new Promise((resolve) => setTimeout(resolve, 1));
            },
          },
        },
        laneRotationIntervalMs: 200,
      });
      const errors: unknown[] = [];
      worker.on('error', (err) => errors.push(err));
      await worker.start();

      const enqueued = [...before.ids];
      let producing = true;
      const producer = (async () => {
        while (producing) {
          const batch = await lh.enqueueMany(
            'online',
            Array.from({ length: 50 }, (_, i) => ({ payload: { i } })),
          );
          enqueued.push(...batch.ids);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      })();

      await waitFor(() => runs.size > 200, { what: 'the worker to be busy' });
      const migrated = await migrate(pool, schema);
      // 019 (flow edges' queues) and every later one come with it: the upgrade from 017 is to the
      // latest version.
      expect(migrated.applied).toEqual(
        loadMigrations()
          .map((m) => m.version)
          .filter((v) => v > 17),
      );
      expect(migrated.applied.slice(0, 2)).toEqual([18, 19]);
      const ranAtMigration = runs.size;
      await waitFor(() => runs.size > ranAtMigration + 200, { what: 'work after the migration' });
      producing = false;
      await producer;
      await waitFor(
        async () => {
          const { rows } = await pool.query(
            `SELECT count(*)::int AS n FROM "${schema}".finished_jobs WHERE queue_name = 'online'`,
          );
          return rows[0].n === enqueued.length;
        },
        { timeoutMs: 60_000, what: 'every job to finish' },
      );
      await worker.stop();

      expect(errors).toEqual([]);
      // Ids stayed unique across the change of identity.
      expect(new Set(enqueued).size).toBe(enqueued.length);
      // Every job ran once (no lease lapsed) and finished once.
      expect(runs.size).toBe(enqueued.length);
      expect([...runs.values()].every((n) => n === 1)).toBe(true);
      const { rows } = await pool.query(
        `SELECT count(DISTINCT id)::int AS distinct_ids, count(*)::int AS finished
         FROM "${schema}".finished_jobs WHERE queue_name = 'online'`,
      );
      expect(rows[0]).toEqual({ distinct_ids: enqueued.length, finished: enqueued.length });

      // The dead, the later and the held job are as they were, in the cold lane.
      const keptAfter = await pool.query(
        `SELECT to_jsonb(j) - 'lane' AS job, lane FROM "${schema}".jobs AS j
         WHERE id = ANY ($1::bigint[]) ORDER BY id`,
        [[deadId, laterId, held.jobId]],
      );
      // Compared on the columns the jobs had before: migrations after 018 add columns of their own
      // (022's fairness_key), empty for these jobs.
      const asBefore = (job: Record<string, unknown>, before: Record<string, unknown>) =>
        Object.fromEntries(Object.keys(before).map((key) => [key, job[key]]));
      expect(keptAfter.rows.map((row, i) => asBefore(row.job, keptBefore.rows[i].job))).toEqual(
        keptBefore.rows.map((row) => row.job),
      );
      expect(keptAfter.rows.map((row) => row.job.fairness_key ?? null)).toEqual([null, null, null]);
      expect(keptAfter.rows.map((row) => row.lane)).toEqual([0, 0, 0]);
      // The outsider's lease, taken before the migration, is still the lease.
      expect(await lh.completeMany([held])).toEqual(new Set([held.jobId]));
      // New jobs go to the hot lanes, with ids after every earlier one.
      const { id: after } = await lh.enqueue('online-after', { n: 1 });
      const lanes = await pool.query(`SELECT lane FROM "${schema}".jobs WHERE id = $1`, [after]);
      expect([1, 2, 3]).toContain(lanes.rows[0].lane);
      expect(BigInt(after)).toBeGreaterThan(
        BigInt(enqueued.reduce((a, b) => (BigInt(a) > BigInt(b) ? a : b))),
      );
    } finally {
      await lh.close();
    }
  });
});
