import { describe, expect, it } from 'vitest';
import { Leasehold, startDashboard } from '../../src/index.js';
import { closestOption } from '../../src/shared/unknown-options.js';
import { databaseUrl, migratedClient } from '../support/db.js';
import { expectValidationError, rejection } from '../support/hostile.js';

// A misspelt option must fail loudly, naming the option and the one meant: before, a typo such as
// `conectionString` was ignored and the client silently fell back to DATABASE_URL.

function thrown(call: () => unknown): unknown {
  try {
    call();
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to throw');
}

function expectSuggestion(err: unknown, field: string, meant: string): void {
  expectValidationError(err, field);
  expect((err as Error).message).toContain(`is not an option (did you mean ${meant}?)`);
}

describe('unknown options', () => {
  it('new Leasehold({ conectionString }) fails naming the option and suggesting connectionString', () => {
    const err = thrown(() => new Leasehold({ conectionString: databaseUrl() } as never));
    expectSuggestion(err, 'options.conectionString', 'connectionString');
    expectSuggestion(
      thrown(() => new Leasehold({ connectionString: databaseUrl(), backoff: { baseMS: 5 } as never })),
      'backoff.baseMS',
      'baseMs',
    );
  });

  it('every options object of the public calls refuses a typo with a suggestion, and writes nothing', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('typos', { n: 1 });
    const [lease] = await lh.claim({ queue: 'typos', owner: 'w' });
    const cases: [Promise<unknown>, string, string][] = [
      [lh.enqueue('typos', {}, { priorty: 1 } as never), 'options.priorty', 'priority'],
      [lh.enqueueMany('typos', [{ payload: 1, delaiMs: 5 } as never]), 'items[0].delaiMs', 'delayMs'],
      [lh.enqueueMany('typos', [{ payload: 1 }], { clinet: undefined } as never), 'options.clinet', 'client'],
      [lh.claim({ queue: 'typos', owner: 'w', limt: 2 } as never), 'options.limt', 'limit'],
      [lh.heartbeat(lease!, { leasMs: 1000 } as never), 'options.leasMs', 'leaseMs'],
      [lh.complete(lease!, { cleint: undefined } as never), 'options.cleint', 'client'],
      [lh.fail(lease!, new Error('x'), { retriable: false } as never), 'options.retriable', 'retryable'],
      [lh.recoverExpired({ batchsize: 10 } as never), 'options.batchsize', 'batchSize'],
      [lh.getJob(id, { histroy: true } as never), 'options.histroy', 'history'],
      [lh.prune({ limits: 5 } as never), 'options.limits', 'limit'],
      [lh.listQueues({ limti: 5 } as never), 'options.limti', 'limit'],
      [lh.listDead({ queeu: 'typos' } as never), 'options.queeu', 'queue'],
      [lh.configureQueue('typos', { pausd: true } as never), 'config.pausd', 'paused'],
    ];
    for (const [promise, field, meant] of cases) expectSuggestion(await rejection(promise), field, meant);
    // Nothing was written: the lease is still held and no other job exists.
    expect((await lh.getJob(id))?.status).toBe('running');
    expect((await lh.listQueues()).find((q) => q.name === 'typos')?.pending).toBe(0);
  });

  it('worker, queue and dashboard options refuse typos with a suggestion', async () => {
    const lh = await migratedClient();
    const handler = async () => {};
    expectSuggestion(
      thrown(() => lh.worker({ queues: { q: handler }, pollIntervallMs: 5 } as never)),
      'options.pollIntervallMs',
      'pollIntervalMs',
    );
    expectSuggestion(
      thrown(() => lh.worker({ queues: { q: { handler, prefech: 5 } } } as never)),
      'queues.q.prefech',
      'prefetch',
    );
    expectSuggestion(await rejection(startDashboard(lh, { prot: 0 } as never)), 'options.prot', 'port');
    // A queue's option given to the worker is pointed to where it belongs (issue 38).
    expectSuggestion(
      thrown(() => lh.worker({ queues: { q: handler }, concurency: 4 } as never)),
      'options.concurency',
      'queues.<queue>.concurrency',
    );
    expectSuggestion(
      thrown(() => lh.worker({ queues: { q: handler }, concurrency: 4 } as never)),
      'options.concurrency',
      'queues.<queue>.concurrency',
    );
  });

  it('configureQueue suggests the longer option a misspelt one starts (concurency: concurrencyLimit)', async () => {
    const lh = await migratedClient();
    expectSuggestion(
      await rejection(lh.configureQueue('typos', { concurency: 4 } as never)),
      'config.concurency',
      'concurrencyLimit',
    );
  });

  it('suggests only a near name: far-off keys get the list of known options and no guess', () => {
    expect(closestOption('priorty', ['priority', 'runAt'])).toBe('priority');
    expect(closestOption('LEASEMS', ['leaseMs', 'limit'])).toBe('leaseMs');
    expect(closestOption('colour', ['priority', 'runAt'])).toBeUndefined();
    const err = thrown(() => new Leasehold({ connectionString: databaseUrl(), flavour: 'x' } as never));
    expectValidationError(err, 'options.flavour');
    expect((err as Error).message).not.toContain('did you mean');
    expect((err as Error).message).toContain('known: connectionString, pool');
  });
});
