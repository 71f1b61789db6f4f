import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { Leasehold, type Leasehold as LeaseholdClient } from '../../src/index.js';
import { databaseUrl, dropSchema, migratedClient, testPool } from '../support/db.js';
import {
  expectValidationError,
  hostileString,
  isStorableText,
  rejection,
  runs,
  tableCounts,
} from '../support/hostile.js';

// Property-based tests of the names and keys callers give: every value either round-trips exactly
// or is refused with a ValidationError before anything is written.

const QUEUE_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.:';

/** The documented queue-name rule: 1 to 128 of letters, digits and _ - . : */
function isQueueName(name: string): boolean {
  return name.length >= 1 && name.length <= 128 && [...name].every((c) => QUEUE_CHARS.includes(c));
}

const queueChar = fc.constantFrom(...QUEUE_CHARS);
const queueNames = fc.oneof(
  fc.string({ unit: queueChar, minLength: 1, maxLength: 20 }),
  fc.string({ unit: queueChar, minLength: 125, maxLength: 131 }),
  fc.constantFrom('a--b', 'x.y:z', '-', '.', ':', '__', 'jobs', 'Q', 'q'),
  hostileString(40),
  // A valid name spoiled by one hostile insertion.
  fc
    .tuple(fc.string({ unit: queueChar, minLength: 1, maxLength: 20 }), hostileString(4), fc.nat())
    .map(
      ([name, bad, at]) => name.slice(0, at % (name.length + 1)) + bad + name.slice(at % (name.length + 1)),
    ),
);

/** Every call that takes a queue name, run with `name`. */
function queueEntryPoints(lh: LeaseholdClient, name: string): [string, () => unknown][] {
  return [
    ['enqueue', () => lh.enqueue(name, { n: 1 })],
    ['enqueueMany', () => lh.enqueueMany(name, [{ payload: 1 }, { payload: 2 }])],
    ['claim', () => lh.claim({ queue: name, owner: 'w' })],
    ['configureQueue', () => lh.configureQueue(name, { owner: 'team' })],
    ['pauseQueue', () => lh.pauseQueue(name)],
    ['listDead', () => lh.listDead({ queue: name })],
    ['replay', () => lh.replay({ queue: name }, { reason: 'r' })],
    ['blockedKeys', () => lh.blockedKeys({ queue: name })],
    ['worker', () => lh.worker({ queues: { [name]: async () => {} } })],
  ];
}

describe('hostile queue names', () => {
  it('a valid name round-trips through enqueue, read and claim; any other is refused at every entry point', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await fc.assert(
      fc.asyncProperty(queueNames, async (name) => {
        if (isQueueName(name)) {
          const { id } = await lh.enqueue(name, { name });
          expect((await lh.getJob(id))?.queueName).toBe(name);
          const [lease] = await lh.claim({ queue: name, owner: 'w' });
          expect(lease).toMatchObject({ jobId: id, queue: name, payload: { name } });
          expect(await lh.complete(lease!)).toBe(true);
          return;
        }
        const before = await tableCounts(pool, lh.schema);
        for (const [entry, call] of queueEntryPoints(lh, name)) {
          let err: unknown;
          try {
            const result = call();
            // Async methods reject rather than throw; `worker()` is synchronous and throws.
            if (entry !== 'worker') expect(result).toBeInstanceOf(Promise);
            err = await rejection(Promise.resolve(result));
          } catch (thrown) {
            err = thrown;
          }
          expectValidationError(err, /queue/);
        }
        expect(await tableCounts(pool, lh.schema)).toEqual(before);
      }),
      runs(80),
    );
  });

  it('names differing only in case or punctuation are different queues', async () => {
    const lh = await migratedClient();
    await lh.enqueue('Emails', { to: 'upper' });
    await lh.enqueue('emails', { to: 'lower' });
    await lh.enqueue('emails.', { to: 'dot' });
    expect((await lh.claim({ queue: 'emails', owner: 'w', limit: 10 })).map((l) => l.payload)).toEqual([
      { to: 'lower' },
    ]);
    expect((await lh.claim({ queue: 'Emails', owner: 'w', limit: 10 })).map((l) => l.payload)).toEqual([
      { to: 'upper' },
    ]);
  });
});

/** The documented schema rule: lower-case letters, digits and _, not a digit first, at most 40, no system name. */
function isSchemaName(name: string): boolean {
  if (name.length < 1 || name.length > 40) return false;
  if (!/[a-z_]/.test(name[0] ?? '')) return false;
  if (![...name].every((c) => /^[a-z0-9_]$/.test(c))) return false;
  return !name.startsWith('pg_') && name !== 'information_schema';
}

const schemaChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789_');
const schemaNames = fc.oneof(
  fc.string({ unit: schemaChar, minLength: 1, maxLength: 42 }),
  fc.constantFrom(
    'pg_catalog',
    'pg_temp',
    'pg_toast',
    'pg_x',
    'information_schema',
    'Public',
    'a'.repeat(41),
  ),
  fc.constantFrom('select', 'user', 'table', 'order', 'end', 'all', '_', '__', 'leasehold'),
  hostileString(45),
  fc
    .string({ unit: schemaChar, minLength: 1, maxLength: 10 })
    .map((name) => `${name}"; DROP SCHEMA public; --`),
);

describe('hostile schema names', () => {
  // A pool that never connects: the constructor must decide without the database.
  const offline = new pg.Pool({ max: 1 });
  afterAll(() => offline.end());

  it('the constructor refuses exactly the names outside the documented rule, synchronously', () => {
    fc.assert(
      fc.property(schemaNames, (schema) => {
        let err: unknown = null;
        try {
          new Leasehold({ pool: offline, schema });
        } catch (thrown) {
          err = thrown;
        }
        if (isSchemaName(schema)) expect(err).toBeNull();
        else expectValidationError(err, 'schema');
      }),
      runs(500),
    );
  });

  it('a valid name, SQL keywords included, is created, used and kept apart from the others', async () => {
    const pool = testPool(2);
    const valid = fc.oneof(
      fc.constantFrom('select', 'user', 'order', 'table', '_'),
      fc.string({ unit: schemaChar, minLength: 1, maxLength: 40 }),
    );
    await fc.assert(
      fc.asyncProperty(valid, async (base) => {
        // A suffix keeps parallel runs apart; the name stays within the rule.
        const schema = `${base.slice(0, 32)}_${Math.random().toString(36).slice(2, 8)}`;
        fc.pre(isSchemaName(schema));
        const lh = new Leasehold({ connectionString: databaseUrl(), schema, poolSize: 2 });
        try {
          await lh.migrate();
          const { id } = await lh.enqueue('q', { schema });
          const [lease] = await lh.claim({ queue: 'q', owner: 'w' });
          expect(lease).toMatchObject({ jobId: id, payload: { schema } });
          const { rows } = await pool.query(
            `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1 AND tablename = 'jobs'`,
            [schema],
          );
          expect(rows[0].n).toBe(1);
        } finally {
          await lh.close();
          await dropSchema(schema);
        }
      }),
      runs(4),
    );
  });
});

const KEY_COLUMN = {
  idempotencyKey: `SELECT idempotency_key AS key FROM "$S".job_keys WHERE job_id = $1`,
  orderingKey: `SELECT j.ordering_key AS key FROM "$S".jobs AS j
                JOIN "$S".ordering_keys AS k USING (queue_name, ordering_key) WHERE j.id = $1`,
  concurrencyKey: `SELECT concurrency_key AS key FROM "$S".jobs WHERE id = $1`,
} as const;
type KeyKind = keyof typeof KEY_COLUMN;
const keyKinds = fc.constantFrom<KeyKind>('idempotencyKey', 'orderingKey', 'concurrencyKey');
const keys = fc.oneof(
  hostileString(60),
  fc.string({ unit: 'grapheme', minLength: 190, maxLength: 210 }),
  fc.string({ unit: 'binary', minLength: 195, maxLength: 205 }),
);

describe('hostile idempotency, ordering and concurrency keys', () => {
  it('a storable key is stored exactly as given; any other is refused and nothing is written', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await fc.assert(
      fc.asyncProperty(keyKinds, keys, fc.boolean(), async (kind, key, many) => {
        const before = await tableCounts(pool, lh.schema);
        // enqueueMany items take ordering and concurrency keys, not idempotency keys.
        const batch = many && kind !== 'idempotencyKey';
        const call = batch
          ? lh
              .enqueueMany('keys', [{ payload: 0 }, { payload: { kind }, [kind]: key }])
              .then((r) => r.ids[1]!)
          : lh.enqueue('keys', { kind }, { [kind]: key }).then((r) => r.id);
        if (!isStorableText(key, 200)) {
          expectValidationError(await rejection(call), batch ? `items[1].${kind}` : `options.${kind}`);
          expect(await tableCounts(pool, lh.schema)).toEqual(before);
          return;
        }
        const id = await call;
        const { rows } = await pool.query(KEY_COLUMN[kind].replaceAll('$S', lh.schema), [id]);
        expect(rows).toEqual([{ key }]);
        if (kind === 'idempotencyKey') {
          expect(await lh.enqueue('keys', { again: true }, { idempotencyKey: key })).toEqual({
            id,
            created: false,
          });
        }
      }),
      runs(80),
    );
  });

  it('two different storable idempotency keys never collide', async () => {
    const lh = await migratedClient();
    const distinctKeys = fc
      .uniqueArray(keys, { minLength: 2, maxLength: 2 })
      .filter(([a, b]) => isStorableText(a!, 200) && isStorableText(b!, 200));
    await fc.assert(
      fc.asyncProperty(distinctKeys, async ([a, b]) => {
        const queue = `collide-${Math.random().toString(36).slice(2)}`;
        const first = await lh.enqueue(queue, { key: a }, { idempotencyKey: a! });
        const second = await lh.enqueue(queue, { key: b }, { idempotencyKey: b! });
        expect(first.created && second.created).toBe(true);
        expect(first.id).not.toBe(second.id);
      }),
      runs(40),
    );
  });

  it('keys that differ only in a lone surrogate are refused instead of being stored as one U+FFFD', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    for (const key of ['order-\ud800', 'order-\udbff', 'order-\udc00']) {
      expectValidationError(
        await rejection(lh.enqueue('orders', {}, { idempotencyKey: key })),
        'options.idempotencyKey',
      );
    }
    expect((await tableCounts(pool, lh.schema)).job_keys).toBe(0);
  });
});

describe('hostile lease owners', () => {
  it('a storable owner is recorded exactly and can complete its claim; any other is refused', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const owners = fc.oneof(hostileString(60), fc.string({ unit: 'binary', minLength: 198, maxLength: 202 }));
    await fc.assert(
      fc.asyncProperty(owners, async (owner) => {
        const { id } = await lh.enqueue('owners', {});
        // Owners are not trimmed: a blank owner is still a name (the documented rule: 1 to 200).
        const storable = owner.length >= 1 && owner.length <= 200 && isStorableText(`x${owner}`, 201);
        if (!storable) {
          expectValidationError(await rejection(lh.claim({ queue: 'owners', owner })), 'owner');
          let thrown: unknown;
          try {
            lh.worker({ owner, queues: { owners: async () => {} } });
          } catch (err) {
            thrown = err;
          }
          expectValidationError(thrown, 'owner');
          const job = await lh.getJob(id);
          expect(job).toMatchObject({ status: 'pending', attemptCount: 0 });
          await lh.cancel(id, { reason: 'clean up' });
          return;
        }
        const [lease] = await lh.claim({ queue: 'owners', owner });
        expect(lease?.jobId).toBe(id);
        const { rows } = await pool.query(`SELECT lease_owner FROM "${lh.schema}".jobs WHERE id = $1`, [id]);
        expect(rows).toEqual([{ lease_owner: owner }]);
        expect(await lh.complete(lease!)).toBe(true);
      }),
      runs(60),
    );
  });
});
