import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/index.js';
import { migratedClient } from '../support/db.js';
import { clientAs } from '../support/roles.js';

describe('flows under the group roles', () => {
  it('a producer enqueues a flow; a worker completes and fails its jobs, releasing and cancelling children; an admin reads it', async () => {
    const owner = await migratedClient();
    const producer = await clientAs(['leasehold_producer'], owner.schema);
    const worker = await clientAs(['leasehold_worker'], owner.schema);
    const admin = await clientAs(['leasehold_admin'], owner.schema);
    const q = 'roles';
    const { ids } = await producer.enqueueFlow([
      { ref: 'a', queue: q, payload: {} },
      { ref: 'b', queue: q, payload: {}, dependsOn: ['a'] },
      { ref: 'c', queue: q, payload: {}, dependsOn: ['b'], onParentDead: 'cancel' },
      { ref: 'd', queue: q, payload: {}, dependsOn: ['b'], onParentDead: 'run' },
    ]);
    const [a] = await worker.claim({ queue: q, owner: 'w' });
    expect(a?.jobId).toBe(ids.a);
    expect(await worker.complete(a as Lease)).toBe(true);
    const [b] = await worker.claim({ queue: q, owner: 'w' });
    expect(b?.jobId).toBe(ids.b);
    expect(await worker.fail(b as Lease, new Error('no'), { retryable: false })).toBe('dead');
    const flow = await admin.getFlow(ids.a as string);
    expect(flow?.nodes.map((n) => [n.ref, n.status])).toEqual([
      ['a', 'succeeded'],
      ['b', 'dead'],
      ['c', 'cancelled'],
      ['d', 'pending'],
    ]);
    const [d] = await worker.claim({ queue: q, owner: 'w' });
    expect(d?.jobId).toBe(ids.d);
  });
});
