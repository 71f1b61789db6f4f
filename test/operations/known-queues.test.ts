import { describe, expect, it } from 'vitest';
import { isLeaseholdError, type Leasehold, QueueNotFoundError } from '../../src/index.js';
import { migratedClient } from '../support/db.js';
import { rejection } from '../support/rejection.js';

async function runAll(lh: Leasehold, queue: string): Promise<void> {
  for (const lease of await lh.claim({ queue, owner: 'test', limit: 100 })) {
    expect(await lh.complete(lease)).toBe(true);
  }
}

describe('known queues', () => {
  it('pauseQueue of a typo rejects with QUEUE_NOT_FOUND naming the closest queue, and leaves no phantom', async () => {
    const lh = await migratedClient();
    await lh.enqueue('emails', { n: 1 });
    await lh.enqueue('reports', { n: 1 });
    const err = await rejection(lh.pauseQueue('emials'));
    expect(err).toBeInstanceOf(QueueNotFoundError);
    expect(isLeaseholdError(err, 'QUEUE_NOT_FOUND')).toBe(true);
    expect((err as QueueNotFoundError).message).toBe('no queue "emials" (did you mean "emails"?)');
    expect((err as QueueNotFoundError).closest).toEqual(['emails']);
    expect(isLeaseholdError(await rejection(lh.resumeQueue('emials')), 'QUEUE_NOT_FOUND')).toBe(true);
    // Nothing far from every known name is suggested.
    expect((await rejection(lh.pauseQueue('zzzzzzzzzz'))) as Error).toHaveProperty(
      'message',
      'no queue "zzzzzzzzzz"',
    );
    expect((await lh.listQueues()).map((q) => q.name)).toEqual(['emails', 'reports']);
    // The real queue pauses as before.
    expect((await lh.pauseQueue('emails')).paused).toBe(true);
  });

  it('{ create: true } pauses a queue before its first job; it is known from then on', async () => {
    const lh = await migratedClient();
    expect((await lh.pauseQueue('invoices', { create: true })).paused).toBe(true);
    expect(await lh.listQueues()).toEqual([
      expect.objectContaining({ name: 'invoices', paused: true, pending: 0 }),
    ]);
    expect((await lh.resumeQueue('invoices')).paused).toBe(false);
    const refused = await rejection(lh.pauseQueue('invoices', { creat: true } as never));
    expect((refused as Error).message).toMatch(/options\.creat: is not an option \(did you mean create\?\)/);
  });

  it('a queue is known through any job state, a configuration or a schedule', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('later', {}, { delayMs: 3_600_000 });
    expect((await lh.pauseQueue('later')).paused).toBe(true);
    await lh.enqueue('running', {});
    const [lease] = await lh.claim({ queue: 'running', owner: 'test' });
    expect(lease).toBeDefined();
    expect((await lh.pauseQueue('running')).paused).toBe(true);
    await lh.configureQueue('configured', { owner: 'team' });
    expect((await lh.pauseQueue('configured')).paused).toBe(true);
    await lh.schedule('nightly-digest', { queue: 'digests', cron: '0 3 * * *', payload: {} });
    expect((await lh.pauseQueue('digests')).paused).toBe(true);
    expect(id).toBeDefined();
  });

  it('a drained queue stays in listQueues() and stats() with its completions, and after its records are pruned; forgetQueue drops it', async () => {
    const lh = await migratedClient({ succeededRetentionMs: 0 });
    await lh.enqueueMany('thumbnails', [{ payload: 1 }, { payload: 2 }]);
    await runAll(lh, 'thumbnails');
    const listed = await lh.listQueues();
    expect(listed).toEqual([
      expect.objectContaining({ name: 'thumbnails', pending: 0, running: 0, dead: 0, cancelled: 0 }),
    ]);
    const stats = await lh.stats();
    expect(stats.queues).toEqual([expect.objectContaining({ queue: 'thumbnails', completedInWindow: 2 })]);
    // Retention removes both succeeded records: the queue is recorded first, and stays.
    expect((await lh.prune()).succeeded).toBe(2);
    expect((await lh.listQueues()).map((q) => q.name)).toEqual(['thumbnails']);
    expect((await lh.stats()).queues.map((q) => q.queue)).toEqual(['thumbnails']);
    expect((await lh.pauseQueue('thumbnails')).paused).toBe(true);

    // An operator forgets it once nothing of it is left; a queue with jobs is not forgotten.
    await lh.enqueue('busy', {});
    await lh.configureQueue('busy', { owner: 'team' });
    expect(await lh.forgetQueue('busy')).toBe(false);
    expect(await lh.forgetQueue('thumbnails')).toBe(true);
    expect((await lh.listQueues()).map((q) => q.name)).toEqual(['busy']);
    expect(isLeaseholdError(await rejection(lh.pauseQueue('thumbnails')), 'QUEUE_NOT_FOUND')).toBe(true);
  });
});
