import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Lease, Leasehold } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';
import { expectValidationError, rejection, runs, tableCounts } from '../support/hostile.js';

// Option bags of the wrong type: every public method must refuse them with a ValidationError,
// never a TypeError from reading a property of null.

/** Every public call that takes an options object (or a lease), with `options` in its place. */
function calls(lh: Leasehold, lease: Lease, options: unknown): [string, () => Promise<unknown>][] {
  const bad = options as never;
  return [
    ['enqueue', () => lh.enqueue('q', {}, bad)],
    ['enqueueMany', () => lh.enqueueMany('q', [{ payload: 1 }], bad)],
    ['enqueueMany item', () => lh.enqueueMany('q', [bad])],
    ['claim', () => lh.claim(bad)],
    ['heartbeat', () => lh.heartbeat(lease, bad)],
    ['heartbeat lease', () => lh.heartbeat(bad)],
    ['complete', () => lh.complete(lease, bad)],
    ['completeMany', () => lh.completeMany([lease], bad)],
    ['fail', () => lh.fail(lease, new Error('x'), bad)],
    ['recoverExpired', () => lh.recoverExpired(bad)],
    ['getJob', () => lh.getJob('1', bad)],
    ['listDead', () => lh.listDead(bad)],
    ['replay', () => lh.replay(['1'], bad)],
    ['replay filter', () => lh.replay(bad, { reason: 'r' })],
    ['cancel', () => lh.cancel('1', bad)],
    ['skip', () => lh.skip('1', bad)],
    ['configureQueue', () => lh.configureQueue('q', bad)],
    ['blockedKeys', () => lh.blockedKeys(bad)],
    ['listQueues', () => lh.listQueues(bad)],
    ['prune', () => lh.prune(bad)],
    ['stats', () => lh.stats(bad)],
    ['checkHealth', () => lh.checkHealth(bad)],
  ];
}

describe('hostile option objects', () => {
  it('null, numbers, strings, booleans and functions in place of options are ValidationErrors', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    await lh.enqueue('held', {});
    const [lease] = await lh.claim({ queue: 'held', owner: 'w' });
    const notObjects = fc.oneof(
      fc.constantFrom(null, 0, 1, '', 'options', true, false, () => ({}), Symbol('s')),
      fc.oneof(fc.integer(), fc.string(), fc.double()),
    );
    await fc.assert(
      fc.asyncProperty(notObjects, async (options) => {
        const before = await tableCounts(pool, lh.schema);
        for (const [name, call] of calls(lh, lease!, options)) {
          const promise = call();
          expect(promise, name).toBeInstanceOf(Promise);
          const err = await rejection(promise);
          expect((err as Error).name, `${name}: ${String(err)}`).toBe('ValidationError');
          expectValidationError(err);
        }
        expect(await tableCounts(pool, lh.schema)).toEqual(before);
      }),
      runs(15),
    );
  });

  it('a flag that is not a boolean is refused, not read as truthy or passed on for PostgreSQL to parse', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('flags', {});
    const [lease] = await lh.claim({ queue: 'flags', owner: 'w' });
    // PostgreSQL would have read 'no' as false.
    expectValidationError(
      await rejection(lh.fail(lease!, new Error('x'), { retryable: 'no' as never })),
      'retryable',
    );
    expectValidationError(await rejection(lh.getJob(id, { history: 'yes' as never })), 'history');
    expect((await lh.getJob(id))?.status).toBe('running');
  });
});
