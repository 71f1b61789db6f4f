import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';
import { roleClient } from '../support/roles.js';

// Flows under the per-schema roles of 016 (issue 17): the producer writes a flow only through its
// enqueue_flow function (job ids drawn inside it), the worker releases and cancels children only
// inside its completion and failure functions, and both read flows back (getFlow) without payloads.
describe('flows under the per-schema roles', () => {
  it('a producer enqueues a flow; a worker completes and fails its jobs, releasing and cancelling children; every role reads it', async () => {
    const owner = await migratedClient();
    const producer = await roleClient(owner.schema, 'producer');
    const worker = await roleClient(owner.schema, 'worker');
    const admin = await roleClient(owner.schema, 'admin');
    const q = 'roles';
    const { ids } = await producer.enqueueFlow([
      { ref: 'a', queue: q, payload: { n: 'a' } },
      { ref: 'b', queue: q, payload: { n: 'b' }, dependsOn: ['a'] },
      { ref: 'c', queue: q, payload: { n: 'c' }, dependsOn: ['b'], onParentDead: 'cancel' },
      { ref: 'd', queue: q, payload: { n: 'd' }, dependsOn: ['b'], onParentDead: 'run' },
    ]);
    // Ids drawn by the statement, ascending in node order, each job with its payload.
    const { rows } = await testPool(1).query(
      `SELECT id::text, payload FROM "${owner.schema}".jobs WHERE id = ANY($1) ORDER BY id`,
      [Object.values(ids)],
    );
    expect(rows).toEqual(['a', 'b', 'c', 'd'].map((n) => ({ id: ids[n], payload: { n } })));
    const [a] = await worker.claim({ queue: q, owner: 'w' });
    expect(a?.jobId).toBe(ids.a);
    expect(await worker.complete(a as Lease)).toBe(true);
    const [b] = await worker.claim({ queue: q, owner: 'w' });
    expect(b?.jobId).toBe(ids.b);
    expect(await worker.fail(b as Lease, new Error('no'), { retryable: false })).toBe('dead');
    for (const reader of [admin, producer, worker]) {
      const flow = await reader.getFlow(ids.a as string);
      expect(flow?.nodes.map((n) => [n.ref, n.status])).toEqual([
        ['a', 'succeeded'],
        ['b', 'dead'],
        ['c', 'cancelled'],
        ['d', 'pending'],
      ]);
    }
    const [d] = await worker.claim({ queue: q, owner: 'w' });
    expect(d?.jobId).toBe(ids.d);
    expect(d?.payload).toEqual({ n: 'd' });
  });
});
