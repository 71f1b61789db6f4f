import fc from 'fast-check';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Leasehold } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';
import {
  expectValidationError,
  holdsUnstorableUnit,
  oddUnit,
  rejection,
  runs,
  tableCounts,
} from '../support/hostile.js';

// Property-based tests of payloads: whatever a caller passes either comes back exactly as JSON
// carries it, through every enqueue path, or is refused with a ValidationError and nothing written.

type Path = 'single' | 'many' | 'ordered' | 'keyed';
const paths = fc.constantFrom<Path>('single', 'many', 'ordered', 'keyed');

/** Enqueues `payload` one of four ways (each a different statement); returns the id and the field a refusal names. */
function enqueueBy(lh: Leasehold, path: Path, payload: unknown): { id: Promise<string>; field: string } {
  const key = `k-${Math.random().toString(36).slice(2)}`;
  switch (path) {
    case 'single':
      return { id: lh.enqueue('payloads', payload).then((r) => r.id), field: 'payload' };
    case 'keyed':
      return {
        id: lh.enqueue('payloads', payload, { idempotencyKey: key }).then((r) => r.id),
        field: 'payload',
      };
    case 'many':
      return {
        id: lh.enqueueMany('payloads', [{ payload: 0 }, { payload }]).then((r) => r.ids[1]!),
        field: 'items[1].payload',
      };
    case 'ordered':
      return {
        id: lh.enqueueMany('payloads', [{ payload, orderingKey: key }]).then((r) => r.ids[0]!),
        field: 'items[0].payload',
      };
  }
}

/** JSON text of `value` with object keys sorted (jsonb reorders them), built without assigning any key. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys
      .map((k) => `${JSON.stringify(k)}:${canonical(Object.getOwnPropertyDescriptor(value, k)?.value)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Whether any string or key of a parsed JSON value holds NUL or a lone surrogate (walked without recursion). */
function holdsUnstorable(value: unknown): boolean {
  const stack = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string' && holdsUnstorableUnit(item)) return true;
    if (item !== null && typeof item === 'object') {
      for (const [k, v] of Object.entries(item)) {
        if (holdsUnstorableUnit(k)) return true;
        stack.push(v);
      }
    }
  }
  return false;
}

/**
 * What JSON makes of a value (`undefined` when JSON.stringify refuses it or yields nothing), and
 * whether PostgreSQL can store that.
 */
function asJson(value: unknown): { text: string; storable: boolean } | undefined {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    return undefined;
  }
  if (text === undefined) return undefined;
  return { text, storable: !holdsUnstorable(JSON.parse(text)) };
}

/** Checks one enqueue of `payload`: an exact round trip, or a ValidationError with no row written. */
async function checkRoundTrip(lh: Leasehold, pool: pg.Pool, path: Path, payload: unknown): Promise<void> {
  const json = asJson(payload);
  const before = json?.storable ? null : await tableCounts(pool, lh.schema);
  const { id, field } = enqueueBy(lh, path, payload);
  if (!json?.storable) {
    expectValidationError(await rejection(id), field);
    expect(await tableCounts(pool, lh.schema)).toEqual(before);
    return;
  }
  const job = await lh.getJob(await id);
  expect(canonical(job?.payload)).toBe(canonical(JSON.parse(json.text)));
}

const oddStrings = fc.oneof(
  fc.string({ unit: oddUnit, maxLength: 40 }),
  // Text that looks like the escapes validation looks for, without being them.
  fc.constantFrom('\\u0000', '\\\\u0000', '\\ud800', 'a\\', '\\"', '\u0000', '\\\u0000', '\ud800\\u0000'),
);

describe('hostile payloads', () => {
  it('any JSON value round-trips exactly through every enqueue path', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    await fc.assert(
      fc.asyncProperty(paths, fc.jsonValue({ maxDepth: 5, stringUnit: 'binary' }), (path, payload) =>
        checkRoundTrip(lh, pool, path, payload),
      ),
      runs(60),
    );
  });

  it('strings with NUL, lone surrogates, escapes and odd Unicode are stored exactly or refused', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const payloads = fc.oneof(
      oddStrings,
      fc.dictionary(oddStrings, oddStrings, { maxKeys: 4 }),
      fc.array(oddStrings, { maxLength: 4 }),
    );
    await fc.assert(
      fc.asyncProperty(paths, payloads, (path, payload) => checkRoundTrip(lh, pool, path, payload)),
      runs(100),
    );
  });

  it('any JavaScript value is stored as JSON carries it, or refused (BigInt, symbols, cycles...)', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const values = fc.anything({
      maxDepth: 3,
      withBigInt: true,
      withBoxedValues: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withNullPrototype: true,
      withObjectString: true,
      key: fc.oneof(fc.string(), fc.constantFrom('__proto__', 'constructor', 'toJSON')),
    });
    await fc.assert(
      fc.asyncProperty(paths, values, (path, payload) => checkRoundTrip(lh, pool, path, payload)),
      runs(60),
    );
    const circular: Record<string, unknown> = { a: 1 };
    circular.self = circular;
    const throwing = {
      toJSON() {
        throw new Error('cannot');
      },
    };
    for (const payload of [circular, throwing, () => 1, Symbol('s'), undefined, 1n]) {
      expectValidationError(await rejection(lh.enqueue('payloads', payload)), 'payload');
    }
  });

  it('__proto__, constructor and prototype keys round-trip as data and pollute no prototype', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const prototypeNames = Object.getOwnPropertyNames(Object.prototype).sort();
    const key = fc.constantFrom(
      '__proto__',
      'constructor',
      'prototype',
      'toString',
      'hasOwnProperty',
      'then',
      'a',
    );
    const { tree } = fc.letrec<{ tree: string; object: string; array: string }>((tie) => ({
      tree: fc.oneof(
        { depthSize: 'small', maxDepth: 4 },
        fc
          .oneof(fc.integer(), fc.string(), fc.constant(null), fc.constant({ polluted: true }))
          .map((v) => JSON.stringify(v)),
        tie('object'),
        tie('array'),
      ),
      object: fc
        .uniqueArray(fc.tuple(key, tie('tree')), { selector: ([k]) => k, maxLength: 4 })
        .map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
      array: fc.array(tie('tree'), { maxLength: 3 }).map((items) => `[${items.join(',')}]`),
    }));
    await fc.assert(
      fc.asyncProperty(paths, tree, async (path, text) => {
        // JSON.parse makes `__proto__` an own property, as a payload parsed from a request would be.
        await checkRoundTrip(lh, pool, path, JSON.parse(text));
      }),
      runs(60),
    );

    const payload = JSON.parse(
      '{"__proto__":{"polluted":"yes","isAdmin":true},"constructor":{"prototype":{"polluted":"yes"}},"nested":[{"__proto__":{"polluted":"yes"}}]}',
    );
    const { id } = await lh.enqueue('proto', payload);
    const [lease] = await lh.claim({ queue: 'proto', owner: 'w' });
    for (const read of [(await lh.getJob(id))?.payload, lease?.payload]) {
      const object = read as Record<string, unknown>;
      expect(Object.getPrototypeOf(object)).toBe(Object.prototype);
      expect(Object.getOwnPropertyDescriptor(object, '__proto__')?.value).toEqual({
        polluted: 'yes',
        isAdmin: true,
      });
      expect(canonical(object)).toBe(canonical(payload));
    }
    const probe: Record<string, unknown> = {};
    expect(probe.polluted).toBeUndefined();
    expect(probe.isAdmin).toBeUndefined();
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeNames);
  });
});

/** `depth` levels of arrays or objects around a leaf. */
function nested(depth: number, shape: 'array' | 'object'): unknown {
  let value: unknown = 'leaf';
  for (let i = 0; i < depth; i++) value = shape === 'array' ? [value] : { d: value };
  return value;
}

/** Depth and leaf of a value built by `nested`, walked without recursion. */
function unnest(value: unknown): { depth: number; leaf: unknown } {
  let depth = 0;
  let current = value;
  while (current !== null && typeof current === 'object') {
    current = Array.isArray(current) ? current[0] : (current as { d: unknown }).d;
    depth++;
  }
  return { depth, leaf: current };
}

describe('deep and huge payloads', () => {
  it('a deeply nested payload round-trips or is refused: JSON.stringify gives up before PostgreSQL does', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const cases = fc.tuple(
      fc.oneof(fc.integer({ min: 1, max: 3000 }), fc.integer({ min: 3000, max: 20_000 })),
      fc.constantFrom<'array' | 'object'>('array', 'object'),
    );
    await fc.assert(
      fc.asyncProperty(cases, async ([depth, shape]) => {
        const before = await tableCounts(pool, lh.schema);
        const result = await lh.enqueue('deep', nested(depth, shape)).then(
          (r) => r.id,
          (err: unknown) => err,
        );
        if (typeof result !== 'string') {
          // Only JSON.stringify's own limit refuses (a RangeError, a few thousand levels deep).
          expectValidationError(result, 'payload');
          expect((result as Error).message).toMatch(/not JSON-serialisable/);
          expect(await tableCounts(pool, lh.schema)).toEqual(before);
          return;
        }
        expect(unnest((await lh.getJob(result))?.payload)).toEqual({ depth, leaf: 'leaf' });
      }),
      runs(20),
    );
    expect(unnest((await lh.getJob((await lh.enqueue('deep', nested(1000, 'array'))).id))?.payload)).toEqual({
      depth: 1000,
      leaf: 'leaf',
    });
    expectValidationError(await rejection(lh.enqueue('deep', nested(100_000, 'object'))), 'payload');
  });

  it('the depth bound is the same in every thread: 2,000 levels round-trip, 2,001 are refused before PostgreSQL sees them', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    for (const shape of ['array', 'object'] as const) {
      const id = (await lh.enqueue('deep', nested(2000, shape))).id;
      expect(unnest((await lh.getJob(id))?.payload)).toEqual({ depth: 2000, leaf: 'leaf' });
      const before = await tableCounts(pool, lh.schema);
      // 2,001 levels are well inside JSON.stringify's reach on any thread: the refusal is the bound's.
      const err = await rejection(lh.enqueue('deep', nested(2001, shape)));
      expectValidationError(err, 'payload');
      expect((err as Error).message).toMatch(/more than 2000 levels/);
      expect(await tableCounts(pool, lh.schema)).toEqual(before);
    }
    // Brackets inside strings are text, not nesting: a long run of them is an ordinary payload.
    const brackets = { text: '['.repeat(5000), keys: { ['{'.repeat(3000)]: '"]}\\' } };
    const id = (await lh.enqueue('deep', brackets)).id;
    expect((await lh.getJob(id))?.payload).toEqual(brackets);
  });

  it('the size limit counts UTF-8 bytes of the JSON text, escapes included, and refuses one byte over', async () => {
    const lh = await migratedClient({ maxPayloadBytes: 1024 });
    const pool = testPool(1);
    const payloads = fc.oneof(
      fc.string({ unit: 'binary', minLength: 200, maxLength: 1100 }),
      fc.string({ unit: oddUnit, minLength: 150, maxLength: 600 }),
      fc.integer({ min: 1010, max: 1030 }).map((n) => 'x'.repeat(n - 2)),
    );
    await fc.assert(
      fc.asyncProperty(payloads, async (payload) => {
        const bytes = Buffer.byteLength(JSON.stringify(payload), 'utf8');
        const storable = !holdsUnstorableUnit(payload);
        const before = await tableCounts(pool, lh.schema);
        const result = await lh.enqueue('sized', payload).then(
          (r) => r.id,
          (err: unknown) => err,
        );
        if (bytes <= 1024 && storable) {
          expect((await lh.getJob(result as string))?.payload).toBe(payload);
          return;
        }
        expectValidationError(result, 'payload');
        if (bytes > 1024) expect((result as Error).message).toContain(`is ${bytes} bytes as JSON`);
        expect(await tableCounts(pool, lh.schema)).toEqual(before);
      }),
      runs(100),
    );
  });

  it('enqueueMany with one bad item anywhere writes nothing, ordering and idempotency tables included', async () => {
    const lh = await migratedClient({ maxPayloadBytes: 2048 });
    const pool = testPool(1);
    const bad = fc.constantFrom<[string, Record<string, unknown>]>(
      ['payload', { payload: 'x'.repeat(4096) }],
      ['payload', { payload: { text: 'nul \u0000' } }],
      ['payload', { payload: ['\udfff'] }],
      ['payload', { payload: 1n }],
      ['orderingKey', { payload: 1, orderingKey: 'k\u0000' }],
      ['concurrencyKey', { payload: 1, concurrencyKey: ' ' }],
      ['maxAttempts', { payload: 1, maxAttempts: 0 }],
    );
    const batch = fc.tuple(fc.integer({ min: 1, max: 20 }), fc.nat(), bad);
    await fc.assert(
      fc.asyncProperty(batch, async ([size, at, [field, item]]) => {
        const items: Record<string, unknown>[] = Array.from({ length: size }, (_, i) => ({
          payload: { i },
          orderingKey: `key-${i % 3}`,
          concurrencyKey: 'c',
        }));
        const index = at % (size + 1);
        items.splice(index, 0, item);
        const before = await tableCounts(pool, lh.schema);
        const err = await rejection(lh.enqueueMany('batch', items as never));
        expectValidationError(err, `items[${index}].${field}`);
        expect(await tableCounts(pool, lh.schema)).toEqual(before);
      }),
      runs(40),
    );
  });

  it('enqueueMany refuses a batch over 32 MiB of payload JSON in all before sending it', async () => {
    const lh = await migratedClient({ maxPayloadBytes: 2 * 1024 * 1024 });
    const pool = testPool(1);
    const mib = 'x'.repeat(1024 * 1024);
    const err = await rejection(
      lh.enqueueMany(
        'bulk',
        Array.from({ length: 33 }, () => ({ payload: mib })),
      ),
    );
    expectValidationError(err, 'items');
    expect((err as Error).message).toMatch(/over the limit of 33554432 for one call; split the batch/);
    expect((await tableCounts(pool, lh.schema)).jobs).toBe(0);
  });
});
