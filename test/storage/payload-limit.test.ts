import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DatabaseError, isLeaseholdError, Leasehold } from '../../src/index.js';
import { DATABASE_PAYLOAD_LIMIT_BYTES, MAX_PAYLOAD_BYTES_LIMIT } from '../../src/shared/validation.js';
import { insertJobs, type NewJob } from '../../src/storage/jobs/enqueue.js';
import { databaseUrl, migratedClient, testPool } from '../support/db.js';
import { expectValidationError, rejection, runs, tableCounts } from '../support/hostile.js';

// The database's own bound on a payload (migration 007), behind the client's check.

/** A payload of `bytes` characters that compresses badly, so its stored size is its raw size. */
function incompressible(bytes: number): string {
  let text = '';
  while (text.length < bytes) text += Math.random().toString(36).slice(2);
  return text.slice(0, bytes);
}

describe('the database payload limit', () => {
  it('jsonb never takes more than six times the JSON text, so a client at its largest setting fits', async () => {
    const pool = testPool(1);
    // The shapes jsonb inflates most: small numbers, empty containers, short keys.
    const element = fc.oneof(
      fc.integer({ min: -9, max: 9 }),
      fc.constantFrom(0, 1.5, 1e-7, 1e308, [], {}, [0], { '': 0 }, '', true, null),
      fc.jsonValue({ maxDepth: 3 }),
    );
    const payloads = fc.oneof(
      fc.array(element, { maxLength: 400 }),
      fc.dictionary(fc.string({ maxLength: 2 }), element, { maxKeys: 100 }),
      fc
        .integer({ min: 1, max: 500 })
        .map((depth) => '['.repeat(depth) + ']'.repeat(depth))
        .map((t) => JSON.parse(t)),
      element,
    );
    await fc.assert(
      fc.asyncProperty(payloads, async (payload) => {
        const text = JSON.stringify(payload);
        const { rows } = await pool.query('SELECT pg_column_size($1::jsonb) AS size', [text]);
        expect(rows[0].size).toBeLessThanOrEqual(6 * Buffer.byteLength(text, 'utf8') + 16);
      }),
      runs(150),
    );
    expect(DATABASE_PAYLOAD_LIMIT_BYTES).toBeGreaterThanOrEqual(6 * MAX_PAYLOAD_BYTES_LIMIT + 16);
    // The client refuses a setting it could not honour.
    expect(() => new Leasehold({ pool, maxPayloadBytes: MAX_PAYLOAD_BYTES_LIMIT + 1 })).toThrow(
      /maxPayloadBytes: must be an integer from 2 to 8388608/,
    );
  });

  it('refuses a writer that bypasses the client, with the constraint the migration names', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const { rows } = await pool.query(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
       WHERE conname = 'jobs_payload_size' AND conrelid = $1::regclass`,
      [`"${lh.schema}".jobs`],
    );
    expect(rows[0]?.def).toContain(`pg_column_size(payload) <= ${DATABASE_PAYLOAD_LIMIT_BYTES}`);
    // Built on the server, so the test does not ship 64 MiB: a jsonb string one byte too large.
    const insert = `INSERT INTO "${lh.schema}".jobs (queue_name, payload) SELECT 'raw', to_jsonb(repeat('x', $1::int))`;
    const err = (await rejection(pool.query(insert, [DATABASE_PAYLOAD_LIMIT_BYTES]))) as {
      code: string;
      constraint: string;
    };
    expect(err).toMatchObject({ code: '23514', constraint: 'jobs_payload_size' });
    expect((await tableCounts(pool, lh.schema)).jobs).toBe(0);
  });

  describe('with the bound lowered to 2 KiB, below a client allowing 64 KiB', () => {
    // The real bound is 64 MiB; lowering it in this file's schema exercises the same constraint,
    // error translation and atomicity without shipping 64 MiB per case.
    async function lowered() {
      const lh = await migratedClient({ maxPayloadBytes: 64 * 1024 });
      const pool = testPool(2);
      await pool.query(
        `ALTER TABLE "${lh.schema}".jobs DROP CONSTRAINT jobs_payload_size,
           ADD CONSTRAINT jobs_payload_size CHECK (pg_column_size(payload) <= 2048)`,
      );
      return { lh, pool };
    }

    it('a violation is a ValidationError that carries no row, and every enqueue path writes nothing', async () => {
      const { lh, pool } = await lowered();
      const big = { secret: `canary-${incompressible(4096)}` };
      const before = await tableCounts(pool, lh.schema);
      const calls = [
        () => lh.enqueue('limit', big),
        () => lh.enqueue('limit', big, { idempotencyKey: 'k' }),
        () => lh.enqueue('limit', big, { orderingKey: 'o', concurrencyKey: 'c' }),
        () => lh.enqueueMany('limit', [{ payload: 1 }, { payload: big }, { payload: 3 }]),
        () =>
          lh.enqueueMany('limit', [
            { payload: 1, orderingKey: 'o' },
            { payload: big, orderingKey: 'o' },
          ]),
      ];
      for (const call of calls) {
        const err = await rejection(call());
        expectValidationError(err, 'payload');
        expect((err as Error).message).toMatch(/over the database's limit \(constraint jobs_payload_size\)/);
        // The driver's error quotes the start of the refused row: it is not kept.
        expect((err as Error).cause).toBeUndefined();
        expect(JSON.stringify(err) + String(err) + (err as Error).stack).not.toContain('canary-');
      }
      expect(await tableCounts(pool, lh.schema)).toEqual(before);
      // A small payload still goes in.
      await expect(lh.enqueue('limit', { small: true })).resolves.toMatchObject({ created: true });
    });

    it('inside a caller transaction, the refusal aborts that transaction (unlike the client check)', async () => {
      const { lh, pool } = await lowered();
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await lh.enqueue('limit', { first: true }, { client });
        expectValidationError(
          await rejection(lh.enqueue('limit', incompressible(4096), { client })),
          'payload',
        );
        const next = await rejection(client.query('SELECT 1'));
        expect((next as { code: string }).code).toBe('25P02');
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      expect((await tableCounts(pool, lh.schema)).jobs).toBe(0);
    });

    it('the storage layer, used without the client, gets the same typed error and writes nothing', async () => {
      const { lh, pool } = await lowered();
      const job = (payloadJson: string): NewJob => ({
        payloadJson,
        priority: 0,
        runAt: null,
        delayMs: 0,
        maxAttempts: 1,
        orderingKey: null,
        concurrencyKey: null,
      });
      const err = await rejection(
        insertJobs(pool, lh.schema, 'limit', [job('1'), job(JSON.stringify(incompressible(4096)))]),
      );
      expectValidationError(err, 'payload');
      expect(isLeaseholdError(err, 'VALIDATION')).toBe(true);
      expect(err).not.toBeInstanceOf(DatabaseError);
      expect((await tableCounts(pool, lh.schema)).jobs).toBe(0);
    });
  });

  it("the client's check comes first: an oversized payload never reaches the server", async () => {
    // A schema that does not exist: a statement sent would fail with a DatabaseError instead.
    const lh = new Leasehold({ connectionString: databaseUrl(), schema: 'no_such_schema' });
    try {
      expect(lh.maxPayloadBytes).toBe(256 * 1024);
      expectValidationError(await rejection(lh.enqueue('q', 'x'.repeat(256 * 1024))), 'payload');
    } finally {
      await lh.close();
    }
  });
});
