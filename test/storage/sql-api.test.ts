import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Leasehold, ValidationError } from '../../src/index.js';
import { loadMigrations, migrate } from '../../src/migrations/migrator.js';
import { SQL_ENQUEUE_OPTIONS, sqlApi } from '../../src/storage/roles/sql-api.js';
import {
  databaseUrl,
  dropSchema,
  listenOptions,
  migratedClient,
  testPool,
  uniqueSchema,
  waitFor,
} from '../support/db.js';
import { createLogin, schemaRole } from '../support/roles.js';
import { started } from '../support/worker.js';

// The stable SQL API (issue 33, migration 023, src/storage/sql-api.ts; docs/sql-api.md), called as
// the producer role would call it from any language: a login granted <schema>_producer, plain SQL.
// The calls from psql and from Python are in test/system/sql-api-clients.test.ts.

let lh: Leasehold;
let s: string;
let producer: pg.Client;

beforeAll(async () => {
  lh = await migratedClient({ ...listenOptions(), backoff: { baseMs: 0, maxMs: 0 } });
  s = `"${lh.schema}"`;
  const login = await createLogin([schemaRole(lh.schema, 'producer')]);
  producer = new pg.Client({ connectionString: login.url });
  await producer.connect();
});

afterAll(async () => {
  await producer?.end();
});

/** The error a producer's call raised (null when it succeeded). */
async function sqlError(text: string, values: unknown[]): Promise<{ code?: string; message: string } | null> {
  return producer.query(text, values).then(
    () => null,
    (err: { code?: string; message: string }) => err,
  );
}

async function jobCount(): Promise<number> {
  const { rows } = await lh.pool.query(
    `SELECT (SELECT count(*) FROM ${s}.jobs) + (SELECT count(*) FROM ${s}.finished_jobs) AS n`,
  );
  return Number(rows[0].n);
}

describe('enqueue, enqueue_many and job_status under the producer role', () => {
  it('enqueue takes every option lh.enqueue takes, in the caller transaction', async () => {
    await producer.query('BEGIN');
    const one = async (payload: unknown, options: unknown) =>
      (await producer.query(`SELECT ${s}.enqueue($1, $2, $3) AS id`, ['sqlapi', payload, options])).rows[0]
        .id as string;
    const plain = await one({ n: 1 }, null);
    const shaped = await one(
      { n: 2 },
      { priority: 7, maxAttempts: 3, concurrencyKey: 'tenant-1', delayMs: 60_000 },
    );
    const at = await one({ n: 3 }, { runAt: '2030-01-01T00:00:00Z' });
    const keyed = [
      await one({ n: 4 }, { idempotencyKey: 'k1' }),
      await one({ n: 5 }, { idempotencyKey: 'k1' }),
    ];
    const ordered = [
      await one({ n: 6 }, { orderingKey: 'acct-1' }),
      await one({ n: 7 }, { orderingKey: 'acct-1' }),
    ];
    const throttle = { dedupe: { key: 'd1', mode: 'throttle', windowMs: 60_000 } };
    const deduped = [await one({ n: 8 }, throttle), await one({ n: 9 }, throttle)];
    // Not visible outside the transaction yet.
    expect(await lh.getJob(plain)).toBeNull();
    await producer.query('COMMIT');

    expect(await lh.getJob(plain)).toMatchObject({ queueName: 'sqlapi', payload: { n: 1 }, priority: 0 });
    const job = await lh.getJob(shaped);
    expect(job).toMatchObject({ priority: 7, maxAttempts: 3, status: 'pending' });
    expect(job!.availableAt.getTime() - job!.createdAt.getTime()).toBeGreaterThanOrEqual(59_000);
    const { rows: keys } = await lh.pool.query(`SELECT concurrency_key FROM ${s}.jobs WHERE id = $1`, [
      shaped,
    ]);
    expect(keys[0].concurrency_key).toBe('tenant-1');
    expect((await lh.getJob(at))?.availableAt.toISOString()).toBe('2030-01-01T00:00:00.000Z');
    expect(keyed[1]).toBe(keyed[0]);
    expect(deduped[1]).toBe(deduped[0]);
    const { rows: order } = await lh.pool.query(
      `SELECT id::text, ordering_key, awaits_predecessor FROM ${s}.jobs WHERE id = ANY($1::bigint[]) ORDER BY id`,
      [ordered],
    );
    expect(order).toEqual([
      { id: ordered[0], ordering_key: 'acct-1', awaits_predecessor: false },
      { id: ordered[1], ordering_key: 'acct-1', awaits_predecessor: true },
    ]);
  });

  it('enqueue_many returns the ids in order; a rolled-back enqueue leaves no job; job_status reads each', async () => {
    const { rows } = await producer.query(`SELECT ${s}.enqueue_many($1, $2, $3)::text[] AS ids`, [
      'sqlapi-many',
      JSON.stringify([{ i: 0 }, { i: 1 }, { i: 2 }]),
      { priority: 3 },
    ]);
    const ids = rows[0].ids as string[];
    expect(ids).toHaveLength(3);
    for (const [i, id] of ids.entries()) {
      expect(await lh.getJob(id)).toMatchObject({ payload: { i }, priority: 3, queueName: 'sqlapi-many' });
    }
    await producer.query('BEGIN');
    const gone = (await producer.query(`SELECT ${s}.enqueue('sqlapi-many', '{}') AS id`)).rows[0]
      .id as string;
    await producer.query('ROLLBACK');
    const status = async (id: string) =>
      (await producer.query(`SELECT ${s}.job_status($1) AS status`, [id])).rows[0].status as string | null;
    expect(await status(gone)).toBeNull();
    expect(await lh.getJob(gone)).toBeNull();
    expect(await status(ids[0]!)).toBe('pending');
    // With an ordering key, the batch is one line in array order: the first runs, the rest wait.
    const { rows: line } = await producer.query(`SELECT ${s}.enqueue_many($1, $2, $3)::text[] AS ids`, [
      'sqlapi-many',
      '[1, 2, 3]',
      { orderingKey: 'line-1', concurrencyKey: 'c-1', runAt: '2030-01-01T00:00:00Z' },
    ]);
    const { rows: waiting } = await lh.pool.query(
      `SELECT id::text, awaits_predecessor, concurrency_key, available_at FROM ${s}.jobs
       WHERE id = ANY($1::bigint[]) ORDER BY id`,
      [line[0].ids],
    );
    expect(waiting.map((job) => job.id)).toEqual(line[0].ids);
    expect(waiting.map((job) => job.awaits_predecessor)).toEqual([false, true, true]);
    expect(new Set(waiting.map((job) => job.concurrency_key))).toEqual(new Set(['c-1']));
    expect(new Set(waiting.map((job) => job.available_at.toISOString()))).toEqual(
      new Set(['2030-01-01T00:00:00.000Z']),
    );
  });

  it('wakes a worker on commit as lh.enqueue does (its poll is an hour away), and job_status follows the job', async () => {
    const worker = await started(
      lh.worker({
        queues: { 'sqlapi-wake': async () => ({ ok: true }) },
        pollIntervalMs: 3_600_000,
        recoveryIntervalMs: 0,
      }),
    );
    await waitFor(() => worker.listenerPid !== null, { what: 'listener' });
    await producer.query('BEGIN');
    const id = (await producer.query(`SELECT ${s}.enqueue('sqlapi-wake', '{"n": 1}') AS id`)).rows[0]
      .id as string;
    const [many] = (await producer.query(`SELECT ${s}.enqueue_many('sqlapi-wake', '[1, 2]') AS ids`)).rows[0]
      .ids as string[];
    await producer.query('COMMIT');
    for (const job of [id, String(many)]) {
      await waitFor(
        async () =>
          (await producer.query(`SELECT ${s}.job_status($1) AS status`, [job])).rows[0].status ===
          'succeeded',
        { what: `job ${job} run after its notification` },
      );
    }
    await worker.stop();
  });

  it('the helpers of migration 023 are not callable by the producer', async () => {
    expect((await sqlError(`SELECT ${s}.api_refuse('a', 'b')`, []))?.code).toBe('42501');
  });
});

/** Arrays nested `depth` deep. */
function nested(depth: number): unknown {
  let value: unknown = [];
  for (let i = 1; i < depth; i++) value = [value];
  return value;
}

// One bad input each, given to lh.enqueue and to the SQL enqueue: the same field and message (the
// SQL one prefixed "leasehold: ", SQLSTATE 22023), and nothing written by either.
const CASES: {
  name: string;
  queue?: string;
  payload?: unknown;
  options: Record<string, unknown> | unknown[];
}[] = [
  { name: 'a bad queue name', queue: 'no spaces allowed', options: {} },
  { name: 'options that are not an object', options: [] },
  { name: 'a mistyped option', options: { priorty: 1 } },
  { name: 'a fractional priority', options: { priority: 5.5 } },
  { name: 'a priority as text', options: { priority: '1' } },
  { name: 'a priority out of range', options: { priority: 2_000_000 } },
  { name: 'a null priority', options: { priority: null } },
  { name: 'no attempts', options: { maxAttempts: 0 } },
  { name: 'a negative delay', options: { delayMs: -1 } },
  { name: 'a blank ordering key', options: { orderingKey: '   ' } },
  { name: 'a long concurrency key', options: { concurrencyKey: 'x'.repeat(201) } },
  { name: 'a numeric idempotency key', options: { idempotencyKey: 5 } },
  { name: 'an idempotency key with an ordering key', options: { idempotencyKey: 'k', orderingKey: 'o' } },
  { name: 'dedupe not an object', options: { dedupe: 'x' } },
  { name: 'dedupe without a mode', options: { dedupe: { key: 'k' } } },
  { name: 'dedupe with a mistyped field', options: { dedupe: { key: 'k', mode: 'throttle', windw: 1 } } },
  { name: 'throttle without a window', options: { dedupe: { key: 'k', mode: 'throttle' } } },
  { name: 'replace with a window', options: { dedupe: { key: 'k', mode: 'replace', windowMs: 5 } } },
  {
    name: 'debounce with a delay',
    options: { dedupe: { key: 'k', mode: 'debounce', windowMs: 10 }, delayMs: 5 },
  },
  {
    name: 'dedupe with an idempotency key',
    options: { dedupe: { key: 'k', mode: 'throttle', windowMs: 10 }, idempotencyKey: 'i' },
  },
  { name: 'a payload over the limit', payload: 'x'.repeat(300_000), options: {} },
  { name: 'a payload nested too deep', payload: nested(2001), options: {} },
];

describe('the SQL enqueue refuses what lh.enqueue refuses, with the same message', () => {
  it.each(CASES)('$name', async ({ queue = 'sqlapi-bad', payload = { ok: true }, options }) => {
    const before = await jobCount();
    const tsErr = await lh.enqueue(queue, payload, options as never).then(
      () => null,
      (e: unknown) => e,
    );
    expect(tsErr).toBeInstanceOf(ValidationError);
    const sqlErr = await sqlError(`SELECT ${s}.enqueue($1, $2, $3)`, [
      queue,
      JSON.stringify(payload),
      JSON.stringify(options),
    ]);
    expect(sqlErr?.code).toBe('22023');
    // The lists of known options differ by `client` only (a SQL caller's transaction is its session).
    const cut = (message: string) => message.split('; known: ')[0];
    expect(cut(sqlErr!.message)).toBe(cut(`leasehold: ${(tsErr as Error).message}`));
    expect(await jobCount()).toBe(before);
  });

  it('a dedupe key given another ordering key than its pending job: the same refusal, nothing written', async () => {
    const first = { orderingKey: 'a', dedupe: { key: 'oc', mode: 'replace' } };
    await producer.query(`SELECT ${s}.enqueue('sqlapi-oc', '1', $1)`, [JSON.stringify(first)]);
    const before = await jobCount();
    const other = { orderingKey: 'b', dedupe: { key: 'oc', mode: 'replace' } };
    const tsErr = await lh.enqueue('sqlapi-oc', 2, other as never).then(
      () => null,
      (e: Error) => e,
    );
    expect(tsErr).toBeInstanceOf(ValidationError);
    const sqlErr = await sqlError(`SELECT ${s}.enqueue('sqlapi-oc', '2', $1)`, [JSON.stringify(other)]);
    expect(sqlErr?.code).toBe('22023');
    expect(sqlErr?.message).toBe(`leasehold: ${tsErr?.message}`);
    expect(await jobCount()).toBe(before);
  });

  it('runAt and delayMs together, and a runAt that is not a timestamp', async () => {
    const both = await sqlError(`SELECT ${s}.enqueue('q', '{}', $1)`, [
      { runAt: '2030-01-01T00:00:00Z', delayMs: 1 },
    ]);
    const tsBoth = await lh.enqueue('q', {}, { runAt: new Date(), delayMs: 1 }).then(
      () => null,
      (e: Error) => e.message,
    );
    expect(both?.message).toBe(`leasehold: ${tsBoth}`);
    for (const runAt of ['soon', 5, 'infinity', null]) {
      const err = await sqlError(`SELECT ${s}.enqueue('q', '{}', $1)`, [{ runAt }]);
      expect(err?.code).toBe('22023');
      expect(err?.message).toMatch(/^leasehold: options\.runAt: must be a valid timestamp/);
    }
  });

  it('enqueue_many refuses a payload list that is not 1 to 10000 payloads, and the options of one job only', async () => {
    const before = await jobCount();
    for (const payloads of ['[]', '{}', JSON.stringify(Array.from({ length: 10_001 }, () => 0))]) {
      const err = await sqlError(`SELECT ${s}.enqueue_many('q', $1)`, [payloads]);
      expect(err?.code).toBe('22023');
      expect(err?.message).toBe('leasehold: payloads: must be an array of 1 to 10000 jobs');
    }
    const keyed = await sqlError(`SELECT ${s}.enqueue_many('q', '[1]', $1)`, [{ idempotencyKey: 'k' }]);
    expect(keyed?.message).toMatch(/^leasehold: options\.idempotencyKey: is not an option/);
    const deep = await sqlError(`SELECT ${s}.enqueue_many('q', $1)`, [
      JSON.stringify([nested(2000), nested(2001)]),
    ]);
    expect(deep?.message).toBe(
      'leasehold: payloads[1]: is not JSON-serialisable here (nested more than 2000 levels deep)',
    );
    const big = await sqlError(`SELECT ${s}.enqueue_many('q', $1)`, [
      JSON.stringify([1, 'x'.repeat(300_000)]),
    ]);
    expect(big?.message).toBe('leasehold: payloads[1]: is 300002 bytes as JSON, over the limit of 262144');
    expect(await jobCount()).toBe(before);
  });

  it('the SQL enqueue knows exactly the options lh.enqueue knows but client', () => {
    expect([...SQL_ENQUEUE_OPTIONS, 'client'].sort()).toEqual(
      [
        'priority',
        'runAt',
        'delayMs',
        'maxAttempts',
        'orderingKey',
        'concurrencyKey',
        'client',
        'idempotencyKey',
        'dedupe',
      ].sort(),
    );
  });
});

describe('version-stable names', () => {
  it('a schema migrated by an older version gains the API, and a later body keeps the name, signature and grants', async () => {
    const schema = uniqueSchema('lh_sqlapi');
    const pool = testPool(2);
    try {
      // The version before the SQL API (023), and the versions a migrate() applies from there.
      await migrate(pool, schema, { upTo: 22 });
      const later = loadMigrations()
        .map((m) => m.version)
        .filter((version) => version > 22);
      const latest = later.at(-1);
      const q = `"${schema}"`;
      const names = async () =>
        (
          await pool.query(
            `SELECT p.oid::int AS oid, p.proname, pg_get_function_identity_arguments(p.oid) AS args,
                    has_function_privilege($2, p.oid, 'EXECUTE') AS producer
             FROM pg_proc AS p WHERE p.pronamespace = $1::regnamespace
               AND p.proname IN ('enqueue', 'enqueue_many', 'job_status') ORDER BY p.proname`,
            [schema, schemaRole(schema, 'producer')],
          )
        ).rows;
      expect(await names()).toEqual([]);
      expect(await migrate(pool, schema)).toMatchObject({ applied: later, version: latest });
      const installed = await names();
      expect(installed.map(({ proname, args, producer }) => ({ proname, args, producer }))).toEqual([
        { proname: 'enqueue', args: 'queue text, payload jsonb, options jsonb', producer: true },
        { proname: 'enqueue_many', args: 'queue text, payloads jsonb, options jsonb', producer: true },
        { proname: 'job_status', args: 'id bigint', producer: true },
      ]);
      const login = await createLogin([schemaRole(schema, 'producer')]);
      const client = new pg.Client({ connectionString: login.url });
      await client.connect();
      try {
        const id = (await client.query(`SELECT ${q}.enqueue('v', '{"a": 1}', '{"priority": 2}') AS id`))
          .rows[0].id as string;
        expect((await client.query(`SELECT ${q}.job_status($1) AS s`, [id])).rows[0].s).toBe('pending');

        // An older version's body (here: one that answers -1) under an older comment: the next
        // migrate() writes this version's over it, in place.
        await pool.query(`CREATE OR REPLACE FUNCTION ${q}.enqueue(queue text, payload jsonb, options jsonb DEFAULT '{}')
          RETURNS bigint LANGUAGE sql SECURITY DEFINER AS 'SELECT -1::bigint'`);
        await pool.query(
          `COMMENT ON FUNCTION ${q}.enqueue(text, jsonb, jsonb) IS 'leasehold:producer:sql_api 0000000000'`,
        );
        expect((await client.query(`SELECT ${q}.enqueue('v', '{}') AS id`)).rows[0].id).toBe('-1');
        expect(await migrate(pool, schema)).toMatchObject({ applied: [], version: latest });
        expect(await names()).toEqual(installed);
        const again = (await client.query(`SELECT ${q}.enqueue('v', '{}') AS id`)).rows[0].id as string;
        expect(BigInt(again)).toBeGreaterThan(BigInt(id));
        const { rows } = await pool.query(`SELECT obj_description($1::regprocedure, 'pg_proc') AS comment`, [
          `${q}.enqueue(text, jsonb, jsonb)`,
        ]);
        expect(rows[0].comment).toBe(sqlApi(schema).comment);
      } finally {
        await client.end();
      }
    } finally {
      await dropSchema(schema);
    }
  });
});

describe('a caller that is not a producer', () => {
  it('a connection string of the owner calls the same functions (databaseUrl)', async () => {
    const client = new pg.Client({ connectionString: databaseUrl() });
    await client.connect();
    try {
      const { rows } = await client.query(`SELECT ${s}.enqueue('sqlapi-owner', '[1]') AS id`);
      expect(await lh.getJob(rows[0].id)).toMatchObject({ payload: [1] });
    } finally {
      await client.end();
    }
  });
});
