// Leasehold with `prefetch`: the worker claims ahead of its free slots into a local buffer, so a
// claim overlaps the completions of running jobs. The counterpart of graphile-worker's localQueue.
import * as base from './leasehold.mjs';

export const { available, setup, load, tableShowsDone, verify, teardown } = base;
export const label = 'Leasehold (prefetch)';

export function prepareWorker(config) {
  return base.prepareWorker({ ...config, prefetch: config.leaseholdPrefetch });
}
