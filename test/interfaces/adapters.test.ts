import { sql as dsql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import knexFactory, { type Knex } from 'knex';
import { Kysely, sql as ksql, PostgresDialect } from 'kysely';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { drizzleAdapter, fromDrizzle } from '../../src/adapters/drizzle.js';
import { fromKnex, knexAdapter } from '../../src/adapters/knex.js';
import { fromKysely, kyselyAdapter } from '../../src/adapters/kysely.js';
import { fromPostgresJs, postgresJsAdapter } from '../../src/adapters/postgres-js.js';
import type { JobContext, Leasehold, OutcomeResult, Queryable, TransactionAdapter } from '../../src/index.js';
import { databaseUrl, expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

/**
 * One library under contract: how to open its transaction, turn it into `{ client }`, write one row
 * of the test's own table through it, and the adapter `job.transaction` takes.
 */
interface Library<Tx> {
  name: string;
  /** Runs `body` in the library's transaction; a thrown ROLLBACK marker rolls it back. */
  transaction<T>(body: (tx: Tx) => Promise<T>): Promise<T>;
  from(tx: Tx): Queryable;
  /** Inserts (job_id) into `schema`.writes through the library itself. */
  write(tx: Tx, schema: string, jobId: string): Promise<unknown>;
  adapter: TransactionAdapter<Tx>;
  close(): Promise<void>;
}

const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
});

function kyselyLibrary(): Library<Kysely<unknown>> {
  const db = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl(), max: 3 }) }),
  });
  return {
    name: 'kysely',
    transaction: (body) => db.transaction().execute((trx) => body(trx)),
    from: (tx) => fromKysely(tx),
    write: (tx, schema, jobId) =>
      ksql`INSERT INTO ${ksql.table(`${schema}.writes`)} (job_id) VALUES (${jobId})`.execute(tx),
    adapter: kyselyAdapter(db) as TransactionAdapter<Kysely<unknown>>,
    close: () => db.destroy(),
  };
}

function knexLibrary(): Library<Knex> {
  const knex = knexFactory({ client: 'pg', connection: databaseUrl(), pool: { min: 0, max: 3 } });
  return {
    name: 'knex',
    transaction: (body) => knex.transaction((trx) => body(trx)),
    from: (tx) => fromKnex(tx),
    write: (tx, schema, jobId) => tx.withSchema(schema).table('writes').insert({ job_id: jobId }),
    adapter: knexAdapter(knex) as TransactionAdapter<Knex>,
    close: () => knex.destroy(),
  };
}

function postgresJsLibrary(): Library<postgres.Sql> {
  const sql = postgres(databaseUrl(), { max: 3, prepare: false, onnotice: () => {} });
  return {
    name: 'postgres.js',
    transaction: (body) => sql.begin((tx) => body(tx as unknown as postgres.Sql)) as never,
    from: (tx) => fromPostgresJs(tx),
    write: (tx, schema, jobId) => tx`INSERT INTO ${tx(schema)}.writes (job_id) VALUES (${jobId})`,
    adapter: postgresJsAdapter(sql) as unknown as TransactionAdapter<postgres.Sql>,
    close: () => sql.end(),
  };
}

type DrizzleDb = ReturnType<typeof drizzle>;
function drizzleLibrary(): Library<DrizzleDb> {
  const pool = new pg.Pool({ connectionString: databaseUrl(), max: 3 });
  const db = drizzle(pool);
  return {
    name: 'drizzle',
    transaction: (body) => db.transaction((tx) => body(tx as unknown as DrizzleDb)),
    from: (tx) => fromDrizzle(tx),
    write: (tx, schema, jobId) =>
      tx.execute(dsql`INSERT INTO ${dsql.identifier(schema)}.writes (job_id) VALUES (${jobId})`),
    adapter: drizzleAdapter(db) as unknown as TransactionAdapter<DrizzleDb>,
    close: () => pool.end(),
  };
}

class Rollback extends Error {}

async function rolledBack(promise: Promise<unknown>): Promise<void> {
  await expect(promise).rejects.toBeInstanceOf(Rollback);
}

async function setUp(): Promise<{ lh: Leasehold; pool: pg.Pool }> {
  const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
  const pool = testPool();
  await pool.query(`CREATE TABLE "${lh.schema}".writes (job_id bigint NOT NULL)`);
  return { lh, pool };
}

function runWorker(lh: Leasehold, handler: (job: JobContext) => Promise<unknown>) {
  const outcomes: OutcomeResult[] = [];
  const worker = lh.worker({
    queues: { lib: { concurrency: 1, leaseMs: 3000, handler } },
    recoveryIntervalMs: 0,
    pollIntervalMs: 20,
    shutdownTimeoutMs: 500,
  });
  worker.on('outcome', (_job, result) => outcomes.push(result));
  return { worker, outcomes };
}

const writes = async (pool: pg.Pool, schema: string) =>
  (await pool.query<{ job_id: string }>(`SELECT job_id FROM "${schema}".writes ORDER BY job_id`)).rows.map(
    (r) => r.job_id,
  );

for (const make of [
  kyselyLibrary,
  knexLibrary,
  postgresJsLibrary,
  drizzleLibrary,
] as (() => Library<unknown>)[]) {
  const library = make();
  closers.push(() => library.close());

  describe(`adapter contract: ${library.name}`, () => {
    it('enqueue in the library transaction: commit keeps the job, rollback removes it', async () => {
      const { lh } = await setUp();
      const kept = await library.transaction((tx) =>
        lh.enqueue('lib', { n: 1 }, { client: library.from(tx) }),
      );
      let droppedId = '';
      await rolledBack(
        library.transaction(async (tx) => {
          droppedId = (await lh.enqueue('lib', { n: 2 }, { client: library.from(tx) })).id;
          throw new Rollback();
        }),
      );
      expect((await lh.getJob(kept.id))?.payload).toEqual({ n: 1 });
      expect(droppedId).not.toBe('');
      expect(await lh.getJob(droppedId)).toBeNull();
    });

    it('complete in the library transaction: commit completes, rollback leaves the lease running', async () => {
      const { lh } = await setUp();
      await lh.enqueue('lib', {});
      await lh.enqueue('lib', {});
      const [a, b] = await lh.claim({ queue: 'lib', owner: 'me', limit: 2 });
      if (!a || !b) throw new Error('expected two leases');
      expect(await library.transaction((tx) => lh.complete(a, { client: library.from(tx) }))).toBe(true);
      await rolledBack(
        library.transaction(async (tx) => {
          expect(await lh.complete(b, { client: library.from(tx) })).toBe(true);
          throw new Rollback();
        }),
      );
      expect((await lh.getJob(a.jobId))?.status).toBe('succeeded');
      expect((await lh.getJob(b.jobId))?.status).toBe('running');
    });

    it('job.transaction with the adapter: the writes and the completion commit together', async () => {
      const { lh, pool } = await setUp();
      const { id } = await lh.enqueue('lib', {});
      const { worker, outcomes } = runWorker(lh, (job) =>
        job.transaction((tx) => library.write(tx, lh.schema, job.id), { with: library.adapter }),
      );
      await started(worker);
      await waitFor(() => outcomes.length === 1, { what: 'one outcome' });
      expect(outcomes).toEqual(['completed']);
      expect((await lh.getJob(id))?.status).toBe('succeeded');
      expect(await writes(pool, lh.schema)).toEqual([id]);
      expect(await lh.leaseRefusals()).toEqual([]);
    });

    it('job.transaction with the adapter: a refused completion rolls the writes back', async () => {
      const { lh, pool } = await setUp();
      const { id } = await lh.enqueue('lib', {});
      const { worker, outcomes } = runWorker(lh, async (job) => {
        if (job.attempt > 1) return;
        await job.transaction(
          async (tx) => {
            await library.write(tx, lh.schema, job.id);
            await expireLease(pool, lh.schema, job.id);
            await lh.recoverExpired();
          },
          { with: library.adapter },
        );
      });
      await started(worker);
      await waitFor(() => outcomes.includes('lost'), { what: 'the lost outcome' });
      await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', {
        what: 'the second attempt',
      });
      expect(await writes(pool, lh.schema)).toEqual([]);
      const refusals = await lh.leaseRefusals();
      expect(refusals.map((r) => [r.operation, r.count])).toEqual([['complete', 1]]);
    });
  });
}
