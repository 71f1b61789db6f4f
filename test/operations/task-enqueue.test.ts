import * as v from 'valibot';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTask, isLeaseholdError, ValidationError } from '../../src/index.js';
import { countByStatus, migratedClient, testPool } from '../support/db.js';
import { rejection } from '../support/hostile.js';

const noop = async () => undefined;

const zodEmail = defineTask('send-email', {
  schema: z.object({ to: z.email(), subject: z.string().min(1) }),
  handler: noop,
});
const valibotResize = defineTask('resize-image', {
  schema: v.object({ url: v.pipe(v.string(), v.url()), width: v.pipe(v.number(), v.integer()) }),
  handler: noop,
});

describe('enqueue of a task validates its payload with any Standard Schema validator', () => {
  it('a payload zod accepts is stored as given on the task queue; one it refuses names the task and the first issue, nothing written', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue(zodEmail, { to: 'ada@example.com', subject: 'hi' });
    expect((await lh.getJob(id))?.queueName).toBe('send-email');
    expect((await lh.getJob(id))?.payload).toEqual({ to: 'ada@example.com', subject: 'hi' });

    const err = await rejection(lh.enqueue(zodEmail, { to: 'not-an-email', subject: 'hi' }));
    expect(err).toBeInstanceOf(ValidationError);
    expect(isLeaseholdError(err, 'VALIDATION')).toBe(true);
    expect((err as ValidationError).field).toBe('payload');
    expect((err as Error).message).toMatch(/task send-email's schema: to: /);
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 1 });
  });

  it('valibot works the same way: the issue path reaches into the payload', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueue(valibotResize, { url: 'https://example.com/a.png', width: 640 });
    const err = await rejection(lh.enqueue(valibotResize, { url: 'https://example.com/a.png', width: 6.5 }));
    expect(isLeaseholdError(err, 'VALIDATION')).toBe(true);
    expect((err as Error).message).toMatch(/task resize-image's schema: width: /);
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 1 });
  });

  it('an async validator (validate returns a promise) is awaited before anything is written', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    // A hand-written Standard Schema whose validate always answers with a promise.
    const asyncSchema = {
      '~standard': {
        version: 1 as const,
        vendor: 'test',
        validate: async (value: unknown) => {
          await new Promise((resolve) => setTimeout(resolve, 5));
          const sku = (value as { sku?: unknown })?.sku;
          return typeof sku === 'string' && sku.startsWith('SKU-')
            ? { value: { sku } }
            : { issues: [{ message: 'unknown sku', path: ['sku'] }] };
        },
        types: undefined as unknown as { input: { sku: string }; output: { sku: string } },
      },
    };
    const reserve = defineTask('reserve', { schema: asyncSchema, handler: noop });
    const err = await rejection(lh.enqueue(reserve, { sku: 'nope' }));
    expect(isLeaseholdError(err, 'VALIDATION')).toBe(true);
    expect((err as Error).message).toMatch(/task reserve's schema: sku: unknown sku/);
    expect(await countByStatus(pool, lh.schema)).toEqual({});
    await lh.enqueue(reserve, { sku: 'SKU-1' });
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 1 });
    // zod's async refinements go through the same path.
    const refined = defineTask('refined', {
      schema: z.object({ n: z.number() }).refine(async (value) => value.n > 0, 'must be positive'),
      handler: noop,
    });
    const zodErr = await rejection(lh.enqueue(refined, { n: -1 }));
    expect((zodErr as Error).message).toMatch(/task refined's schema: \(root\): must be positive/);
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 1 });
  });

  it('enqueueMany of a task is all or nothing: one bad payload writes none and names its index', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const err = await rejection(
      lh.enqueueMany(zodEmail, [
        { payload: { to: 'a@example.com', subject: 'one' } },
        { payload: { to: 'b@example.com', subject: '' }, priority: 5 },
      ]),
    );
    expect(isLeaseholdError(err, 'VALIDATION')).toBe(true);
    expect((err as ValidationError).field).toBe('items[1].payload');
    expect((err as Error).message).toMatch(/subject: /);
    expect(await countByStatus(pool, lh.schema)).toEqual({});
    const { ids } = await lh.enqueueMany(zodEmail, [
      { payload: { to: 'a@example.com', subject: 'one' } },
      { payload: { to: 'b@example.com', subject: 'two' }, priority: 5 },
    ]);
    expect(ids).toHaveLength(2);
    expect((await lh.getJob(ids[1] as string))?.queueName).toBe('send-email');
  });

  it('a task without a schema, and a queue given by name, enqueue exactly as before (no validation)', async () => {
    const lh = await migratedClient();
    const plain = defineTask<{ n: number }>('plain', { handler: noop });
    const { id } = await lh.enqueue(plain, { n: 1 });
    expect((await lh.getJob(id))?.queueName).toBe('plain');
    const byName = await lh.enqueue('send-email', { anything: true });
    expect((await lh.getJob(byName.id))?.payload).toEqual({ anything: true });
  });

  it('defineTask refuses a bad name, a missing handler, an unknown option and a schema that is not a Standard Schema', () => {
    const refused = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err;
      }
      throw new Error('expected a ValidationError');
    };
    const bad = refused(() => defineTask('has space', { handler: noop }));
    expect(isLeaseholdError(bad, 'VALIDATION')).toBe(true);
    expect((bad as ValidationError).field).toBe('name');
    const noHandler = refused(() => defineTask('t', {} as never));
    expect((noHandler as ValidationError).field).toBe('options.handler');
    const typo = refused(() => defineTask('t', { handler: noop, leaseMS: 5 } as never));
    expect((typo as Error).message).toMatch(/did you mean leaseMs/);
    const notSchema = refused(() => defineTask('t', { handler: noop, schema: { parse() {} } } as never));
    expect((notSchema as ValidationError).field).toBe('options.schema');
  });
});
