import { describe, expect, it } from 'vitest';
import { type AbortReason, JobNotFoundError, JobStateError, ValidationError } from '../../src/index.js';
import { countByStatus, migratedClient, testPool, waitFor } from '../support/db.js';
import { claimableSince } from '../support/job-states.js';
import { deferred, started } from '../support/worker.js';

describe('cancellation', () => {
  it('a pending job goes terminal with code CANCELLED, recorded with who and why, and is never claimed', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('invoices', { n: 1 });
    expect(await lh.cancel(id, { reason: 'customer closed the account', actor: 'ops@example.com' })).toEqual({
      id,
      previousStatus: 'pending',
    });
    const job = await lh.getJob(id, { history: true });
    expect(job).toMatchObject({ status: 'cancelled', lastErrorCode: 'CANCELLED' });
    expect(job!.finishedAt).toBeInstanceOf(Date);
    expect(job!.history.map((e) => e.kind)).toEqual(['enqueued', 'cancelled']);
    expect(job!.history[1]).toMatchObject({
      actor: 'ops@example.com',
      reason: 'customer closed the account',
      statusAfter: 'cancelled',
      owner: null,
    });
    expect(await lh.claim({ queue: 'invoices', owner: 'w' })).toEqual([]);
    // Cancelled is not dead: no alert, no replay by filter.
    expect((await lh.listDead()).jobs).toEqual([]);
    await expect(lh.replay([id], { reason: 'x' })).rejects.toThrow(JobStateError);
  });

  it('cancelling a running job bumps its token: the holder is fenced out of every write', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('fenced', {});
    const [lease] = await lh.claim({ queue: 'fenced', owner: 'holder' });
    expect(await lh.cancel(id, { reason: 'stuck upstream' })).toMatchObject({ previousStatus: 'running' });
    expect(await lh.heartbeat(lease!)).toBe(false);
    expect(await lh.complete(lease!)).toBe(false);
    expect(await lh.fail(lease!, new Error('late'))).toBe('lost');
    const job = await lh.getJob(id, { history: true });
    expect(job).toMatchObject({ status: 'cancelled', leaseOwner: null });
    expect(BigInt(job!.leaseToken)).toBe(BigInt(lease!.token) + 1n);
    expect(job!.history.map((e) => [e.kind, e.owner, e.operation])).toEqual([
      ['enqueued', null, null],
      ['claimed', 'holder', null],
      ['cancelled', 'holder', null],
      ['refused', 'holder', 'heartbeat'],
      ['refused', 'holder', 'complete'],
      ['refused', 'holder', 'fail'],
    ]);
    expect(job!.history[2]).toMatchObject({ token: lease!.token, attempt: 1, reason: 'stuck upstream' });
  });

  it("a running job's worker sees its signal abort at the next renewal, and nothing it writes lands", async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('long', {});
    const running = deferred();
    const aborted: AbortReason[] = [];
    const worker = lh.worker({
      queues: {
        long: {
          // Long enough that a slow renewal under load cannot let the lease lapse on its own first.
          leaseMs: 1500,
          renew: 'alive',
          handler: async (job) => {
            running.resolve();
            await new Promise<void>((resolve) => job.signal.addEventListener('abort', () => resolve()));
            // Returns normally, as a handler that ignores the reason would: still no completion.
          },
        },
      },
      pollIntervalMs: 20,
    });
    worker.on('aborted', (_job, reason) => aborted.push(reason));
    await started(worker);
    await running.promise;
    await lh.cancel(id, { reason: 'no longer needed', actor: 'tests' });
    await waitFor(() => worker.counters.lost === 1, { what: 'the run counted as lost' });
    expect(aborted).toEqual(['cancelled']);
    expect(worker.counters.cancelled).toBe(1);
    expect(worker.counters.completed).toBe(0);
    const job = await lh.getJob(id, { history: true });
    expect(job?.status).toBe('cancelled');
    expect(job!.history.filter((e) => e.kind === 'refused').map((e) => e.operation)).toEqual(['heartbeat']);
  });

  it('cancelling a finished job is a typed error, and an unknown one too', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('done', {});
    const [lease] = await lh.claim({ queue: 'done', owner: 'w' });
    await lh.complete(lease!);
    const err = await lh.cancel(id, { reason: 'too late' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JobStateError);
    expect((err as Error).message).toContain(`${id} is succeeded`);
    const { id: dead } = await lh.enqueue('done', {}, { maxAttempts: 1 });
    const [deadLease] = await lh.claim({ queue: 'done', owner: 'w' });
    await lh.fail(deadLease!, new Error('x'));
    await expect(lh.cancel(dead, { reason: 'x' })).rejects.toThrow(`${dead} is dead`);
    await expect(lh.cancel('123456789', { reason: 'x' })).rejects.toThrow(JobNotFoundError);
    await expect(lh.cancel(id, { reason: '' })).rejects.toThrow(ValidationError);
    await expect(lh.cancel(id, { reason: 'x', actor: 'a'.repeat(201) })).rejects.toThrow(ValidationError);
  });
});

describe('pausing queues', () => {
  it('a paused queue is not claimed, others are, running jobs finish, and resume brings it back', async () => {
    const lh = await migratedClient();
    await lh.enqueueMany('paused', [{ payload: 1 }, { payload: 2 }]);
    await lh.enqueue('open', {});
    const [running] = await lh.claim({ queue: 'paused', owner: 'w' });
    expect(await lh.pauseQueue('paused')).toMatchObject({ name: 'paused', paused: true });
    expect(await lh.claim({ queue: 'paused', owner: 'w', limit: 10 })).toEqual([]);
    expect(await lh.claim({ queue: 'open', owner: 'w' })).toHaveLength(1);
    expect(await lh.complete(running!)).toBe(true);
    expect(await lh.resumeQueue('paused')).toMatchObject({ paused: false });
    expect(await lh.claim({ queue: 'paused', owner: 'w', limit: 10 })).toHaveLength(1);
  });

  it('a worker claims nothing from a paused queue until it is resumed', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.pauseQueue('held', { create: true }); // before its first job
    await lh.enqueueMany(
      'held',
      Array.from({ length: 20 }, (_, i) => ({ payload: i })),
    );
    const seen: number[] = [];
    const worker = lh.worker({
      queues: { held: async (job) => void seen.push(job.payload as number), sentinel: async () => {} },
      pollIntervalMs: 20,
    });
    await started(worker);
    // The worker tried the paused queue at start and on every poll since; a job on another queue,
    // enqueued after another held one (whose notification wakes the held queue), proves it kept going.
    await lh.enqueue('held', 20);
    const { id: sentinel } = await lh.enqueue('sentinel', {});
    await waitFor(async () => (await lh.getJob(sentinel))?.status === 'succeeded', { what: 'sentinel' });
    expect(seen).toEqual([]);
    expect(await countByStatus(pool, lh.schema)).toEqual({ pending: 21, succeeded: 1 });
    await lh.resumeQueue('held');
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 22, { what: 'drained' });
    expect(seen).toHaveLength(21);
  });

  it('configureQueue keeps what it is not given, clears with null, and listQueues shows every queue', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany('billing', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    await claimableSince(pool, lh.schema, 90_000);
    await lh.claim({ queue: 'billing', owner: 'w' });
    await lh.configureQueue('billing', { owner: 'team-billing', deadRetentionMs: 86_400_000 });
    await lh.pauseQueue('billing');
    expect(await lh.configureQueue('billing', { succeededRetentionMs: 60_000 })).toMatchObject({
      owner: 'team-billing',
      deadRetentionMs: 86_400_000,
      succeededRetentionMs: 60_000,
      paused: true,
    });
    await lh.configureQueue('empty', { owner: 'nobody' });
    const queues = await lh.listQueues();
    expect(queues.map((q) => q.name)).toEqual(['billing', 'empty']);
    expect(queues[0]).toMatchObject({ pending: 2, running: 1, dead: 0, owner: 'team-billing', paused: true });
    expect(queues[0]!.oldestClaimableAgeMs).toBeGreaterThanOrEqual(89_000);
    expect(queues[1]).toMatchObject({ pending: 0, oldestClaimableAgeMs: null, paused: false });
    expect(await lh.configureQueue('billing', { owner: null, deadRetentionMs: null })).toMatchObject({
      owner: null,
      deadRetentionMs: null,
      succeededRetentionMs: 60_000,
    });
    await expect(lh.configureQueue('billing', { deadRetentionMs: -1 })).rejects.toThrow(ValidationError);
    await expect(lh.configureQueue('bad name!', { paused: true })).rejects.toThrow(ValidationError);
    await expect(lh.configureQueue('billing', { pause: true } as never)).rejects.toThrow(/not an option/);
  });
});
