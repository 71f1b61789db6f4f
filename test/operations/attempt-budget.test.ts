import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCliInProcess } from '../support/cli-inprocess.js';
import { databaseUrl, migratedClient, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

afterEach(() => vi.restoreAllMocks());

describe('the attempt budget a dead job had', () => {
  it('is recorded at death and shown beside its attempts, with why it was smaller than max', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    // An unclassified error thrown by a handler: the queue's unknownErrorAttempts (default 3) apply.
    const { id: unclassified } = await lh.enqueue('budget', { n: 1 }, { maxAttempts: 8 });
    const worker = lh.worker({
      queues: {
        budget: async () => {
          throw new Error('something unexpected');
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(unclassified))?.status === 'dead', { what: 'death' });
    await worker.stop();
    // A permanent failure: dead at once, its budget unspent.
    const { id: permanent } = await lh.enqueue('budget', { n: 2 }, { maxAttempts: 8 });
    const [lease] = await lh.claim({ queue: 'budget', owner: 'w' });
    expect(await lh.fail(lease!, new Error('bad input'), { retryable: false })).toBe('dead');

    const { jobs } = await lh.listDead({ queue: 'budget' });
    expect(jobs.map((job) => [job.id, job.attemptCount, job.attemptBudget, job.maxAttempts])).toEqual([
      [permanent, 1, 8, 8],
      [unclassified, 3, 3, 8],
    ]);

    const listed = await runCliInProcess(['dead', 'list', '--queue', 'budget', ...db]);
    expect(listed.stdout).toMatch(
      new RegExp(`^${unclassified} +budget +3/3 \\(budget for this error; max 8\\) `, 'm'),
    );
    expect(listed.stdout).toMatch(new RegExp(`^${permanent} +budget +1/8 \\(permanent error\\) `, 'm'));
    expect(listed.stdout).toContain(
      "unclassified errors (neither RetryableError nor PermanentError) get the queue's unknownErrorAttempts",
    );
    const shown = await runCliInProcess(['jobs', 'show', unclassified, ...db]);
    expect(shown.stdout).toContain('attempts 3/3 (budget for this error; max 8), priority 0');
  });
});
