import { describe, expect, it } from 'vitest';
import { JobStateError, type Lease, ValidationError } from '../../src/index.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { claimableSince, expireLeases } from '../support/job-states.js';

type Lh = Awaited<ReturnType<typeof migratedClient>>;

async function claimOne(lh: Lh, queue: string): Promise<Lease | undefined> {
  const [lease] = await lh.claim({ queue, owner: 'w' });
  return lease;
}

describe('per-aggregate ordering', () => {
  it('runs each key strictly in enqueue order, one at a time, under 8 concurrent claimers', async () => {
    const lh = await migratedClient({ poolSize: 12 });
    const keys = 12;
    const perKey = 15;
    // Interleaved across keys, in one batch and then one at a time: both enqueue paths.
    const items = [];
    for (let seq = 0; seq < perKey - 3; seq++) {
      for (let k = 0; k < keys; k++) items.push({ payload: { k, seq }, orderingKey: `order-${k}` });
    }
    await lh.enqueueMany('orders', items);
    for (let seq = perKey - 3; seq < perKey; seq++) {
      for (let k = 0; k < keys; k++) await lh.enqueue('orders', { k, seq }, { orderingKey: `order-${k}` });
    }
    // Plain jobs share the queue and are not held up by anything.
    await lh.enqueueMany(
      'orders',
      Array.from({ length: 30 }, (_, i) => ({ payload: { plain: i } })),
    );

    const done = new Array<number>(keys).fill(0);
    const running = new Set<number>();
    const violations: string[] = [];
    let plain = 0;
    const claimer = async (n: number) => {
      let idle = 0;
      while (idle < 20) {
        const leases = await lh.claim({ queue: 'orders', owner: `c${n}`, limit: 3 });
        if (leases.length === 0) {
          idle++;
          await new Promise((resolve) => setTimeout(resolve, 5));
          continue;
        }
        idle = 0;
        for (const lease of leases) {
          const p = lease.payload as { k?: number; seq?: number; plain?: number };
          if (p.k === undefined) {
            plain++;
            continue;
          }
          const k = p.k;
          if (running.has(k)) violations.push(`key ${k} ran twice at once`);
          if (p.seq !== done[k]) violations.push(`key ${k} ran ${p.seq} after ${done[k]} of its jobs`);
          running.add(k);
        }
        // Hold the jobs a little, so the claimers' batches overlap in time.
        await new Promise((resolve) => setTimeout(resolve, 1 + (n % 3)));
        for (const lease of leases) {
          const p = lease.payload as { k?: number };
          if (p.k === undefined) continue;
          // Counted before the completion commits: its successor cannot be claimed earlier.
          running.delete(p.k);
          done[p.k] = (done[p.k] as number) + 1;
        }
        const accepted = await lh.completeMany(leases);
        expect(accepted.size).toBe(leases.length);
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, n) => claimer(n)));
    expect(violations).toEqual([]);
    expect(done).toEqual(new Array(keys).fill(perKey));
    expect(plain).toBe(30);
  });

  it('a cancelled job leaves a gap that does not block its key, whether it waited or was the head', async () => {
    const lh = await migratedClient();
    const [a1, a2, a3] = (
      await lh.enqueueMany(
        'gaps',
        [1, 2, 3].map((n) => ({ payload: { n }, orderingKey: 'a' })),
      )
    ).ids as [string, string, string];
    await lh.cancel(a2, { reason: 'not needed' });
    const first = await claimOne(lh, 'gaps');
    expect(first?.jobId).toBe(a1);
    expect(await claimOne(lh, 'gaps')).toBeUndefined();
    await lh.complete(first!);
    expect((await claimOne(lh, 'gaps'))?.jobId).toBe(a3);

    const b1 = await lh.enqueue('gaps', { n: 1 }, { orderingKey: 'b' });
    const b2 = await lh.enqueue('gaps', { n: 2 }, { orderingKey: 'b' });
    await lh.cancel(b1.id, { reason: 'head cancelled while pending' });
    expect((await claimOne(lh, 'gaps'))?.jobId).toBe(b2.id);
  });

  it('a dead job blocks its key until it is replayed, then runs before the jobs behind it', async () => {
    const lh = await migratedClient();
    const c1 = await lh.enqueue('poison', { n: 1 }, { orderingKey: 'c', maxAttempts: 1 });
    const c2 = await lh.enqueue('poison', { n: 2 }, { orderingKey: 'c' });
    const other = await lh.enqueue('poison', { n: 3 }, { orderingKey: 'other' });
    const lease = await claimOne(lh, 'poison');
    expect(lease?.jobId).toBe(c1.id);
    expect(await lh.fail(lease!, new Error('bad input'))).toBe('dead');
    // Other keys go on; this one is blocked.
    const otherLease = await claimOne(lh, 'poison');
    expect(otherLease?.jobId).toBe(other.id);
    await lh.complete(otherLease!);
    expect(await claimOne(lh, 'poison')).toBeUndefined();
    const blocked = await lh.blockedKeys({ queue: 'poison' });
    expect(blocked).toMatchObject([{ queue: 'poison', orderingKey: 'c', headJobId: c1.id, waiting: 1 }]);
    expect(blocked[0]!.blockedMs).toBeGreaterThanOrEqual(0);

    await lh.replay([c1.id], { reason: 'fixed the input' });
    const again = await claimOne(lh, 'poison');
    expect(again?.jobId).toBe(c1.id);
    expect(await claimOne(lh, 'poison')).toBeUndefined();
    await lh.complete(again!);
    expect((await claimOne(lh, 'poison'))?.jobId).toBe(c2.id);
    expect(await lh.blockedKeys()).toEqual([]);
  });

  it('an operator can skip a dead head: recorded as key_skipped, and the key moves on', async () => {
    const lh = await migratedClient();
    const d1 = await lh.enqueue('skip', { n: 1 }, { orderingKey: 'd', maxAttempts: 1 });
    const d2 = await lh.enqueue('skip', { n: 2 }, { orderingKey: 'd' });
    await lh.fail((await claimOne(lh, 'skip'))!, new Error('poison'));
    expect(await claimOne(lh, 'skip')).toBeUndefined();
    await expect(lh.skip(d2.id, { reason: 'not dead' })).rejects.toThrow(JobStateError);
    await expect(lh.skip(d1.id, { reason: '' })).rejects.toThrow(ValidationError);
    await lh.skip(d1.id, { reason: 'bad record, handled by hand', actor: 'ops' });
    const job = await lh.getJob(d1.id, { history: true });
    expect(job).toMatchObject({ status: 'cancelled', lastErrorCode: 'SKIPPED' });
    expect(job!.history.at(-1)).toMatchObject({
      kind: 'key_skipped',
      actor: 'ops',
      statusAfter: 'cancelled',
    });
    expect((await claimOne(lh, 'skip'))?.jobId).toBe(d2.id);
  });

  it('a retrying job keeps its place: its successor does not overtake it during the backoff', async () => {
    const lh = await migratedClient();
    const e1 = await lh.enqueue('retry', { n: 1 }, { orderingKey: 'e' });
    const e2 = await lh.enqueue('retry', { n: 2 }, { orderingKey: 'e' });
    expect(await lh.fail((await claimOne(lh, 'retry'))!, new Error('flaky'), { delayMs: 300 })).toBe('retry');
    expect(await claimOne(lh, 'retry')).toBeUndefined();
    const retried = await waitFor(() => claimOne(lh, 'retry'), { what: 'the retry to become claimable' });
    expect(retried.jobId).toBe(e1.id);
    await lh.complete(retried);
    expect((await claimOne(lh, 'retry'))?.jobId).toBe(e2.id);
  });

  it('concurrent enqueues of one key make exactly one head, and racing completions lose no job', async () => {
    const lh = await migratedClient({ poolSize: 20 });
    const ids = await Promise.all(
      Array.from({ length: 20 }, (_, n) => lh.enqueue('race', { n }, { orderingKey: 'same' })),
    );
    expect(await lh.claim({ queue: 'race', owner: 'w', limit: 20 })).toHaveLength(1);
    const pool = testPool();
    await expireLeases(pool, lh.schema, {}, 1);
    await lh.recoverExpired();
    await claimableSince(pool, lh.schema, 0);

    // Completions race enqueues of the same keys: every job must still run, in order per producer.
    const seen: number[] = [];
    let producing = true;
    const producer = (async () => {
      for (let n = 0; n < 60; n++) await lh.enqueue('race', { n: 100 + n }, { orderingKey: `r${n % 3}` });
      producing = false;
    })();
    const consumer = async () => {
      for (;;) {
        const leases = await lh.claim({ queue: 'race', owner: 'c', limit: 5 });
        for (const lease of leases) seen.push((lease.payload as { n: number }).n);
        if (leases.length > 0) await lh.completeMany(leases);
        else if (!producing && seen.length >= 80) return;
        else await new Promise((resolve) => setTimeout(resolve, 2));
      }
    };
    await Promise.all([producer, consumer(), consumer(), consumer()]);
    expect(seen.filter((n) => n < 100).sort((a, b) => a - b)).toEqual(ids.map((_, n) => n));
    for (let r = 0; r < 3; r++) {
      const own = seen.filter((n) => n >= 100 && (n - 100) % 3 === r);
      expect(own).toEqual([...own].sort((a, b) => a - b));
      expect(own).toHaveLength(20);
    }
  });

  it('rejects an ordering key combined with an idempotency key, and an empty key, before writing', async () => {
    const lh = await migratedClient();
    await expect(lh.enqueue('v', {}, { orderingKey: 'k', idempotencyKey: 'i' })).rejects.toThrow(
      ValidationError,
    );
    await expect(lh.enqueue('v', {}, { orderingKey: '' })).rejects.toThrow(ValidationError);
    expect(await claimOne(lh, 'v')).toBeUndefined();
  });
});
