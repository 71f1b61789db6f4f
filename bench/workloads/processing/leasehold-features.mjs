// Leasehold at its defaults on a schema where every feature is in use by OTHER queues (issue 28:
// "every feature present in the schema but unused by the jobs"): flows waiting on their parents,
// a cron schedule, rate, concurrency and per-key limits, round-robin fairness, ordering keys and
// dedupe keys, each with pending jobs. The bench queue's own jobs use none of them, so its claims
// and completions should cost what they cost on an empty schema (the "Leasehold defaults" row).
import { benchClient, LEASEHOLD_QUEUE } from '../../lib/leasehold-schema.mjs';
import * as base from './leasehold.mjs';

export const { available, setup, tableShowsDone, verify, teardown, prepareWorker } = base;
export const label = 'Leasehold (features used by other queues)';

// Jobs of each feature's queue, left pending for the whole run (no worker serves those queues).
const PER_FEATURE = 1000;

export async function load(ctx, jobs, rep) {
  const run = await base.load(ctx, jobs, rep);
  const lh = await benchClient(ctx.connectionString, 2);
  try {
    await lh.configureQueue('f-rate', { rateLimit: { max: 10, perMs: 1000 }, concurrencyLimit: 2 });
    await lh.configureQueue('f-per-key', { concurrencyLimitPerKey: 1 });
    await lh.configureQueue('f-fair', { fairness: 'round-robin' });
    await lh.schedule('f-cron', { cron: '0 0 1 1 *', queue: 'f-cron', payload: {} });
    const many = (make) => Array.from({ length: PER_FEATURE }, (_, i) => make(i));
    await lh.enqueueMany(
      'f-rate',
      many(() => ({ payload: {} })),
    );
    await lh.enqueueMany(
      'f-per-key',
      many((i) => ({ payload: {}, concurrencyKey: `k${i % 10}` })),
    );
    await lh.enqueueMany(
      'f-fair',
      many((i) => ({ payload: {}, fairnessKey: `t${i % 20}` })),
    );
    await lh.enqueueMany(
      'f-ordered',
      many((i) => ({ payload: {}, orderingKey: `o${i % 50}` })),
    );
    await lh.enqueueMany(
      'f-dedupe',
      many((i) => ({ payload: {}, dedupe: { key: `d${i}`, mode: 'throttle', windowMs: 3_600_000 } })),
    );
    for (let i = 0; i < PER_FEATURE / 10; i++) {
      await lh.enqueueFlow([
        { ref: 'a', queue: 'f-flow', payload: {} },
        { ref: 'b', queue: 'f-flow', payload: {} },
        { ref: 'join', queue: 'f-flow-join', payload: {}, dependsOn: ['a', 'b'] },
      ]);
    }
  } finally {
    await lh.close();
  }
  if (LEASEHOLD_QUEUE.startsWith('f-')) throw new Error('the bench queue must not be a feature queue');
  return run;
}
