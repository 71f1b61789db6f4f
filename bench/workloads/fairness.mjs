// Claim throughput of a round-robin queue (fairness: 'round-robin', issue 34) as a ratio to a plain
// queue: the same jobs, claimed and completed by 4 claimers in batches of 100 (ordering.mjs's
// runner). Round-robin: one tenant with 90% of the jobs and 200 small ones sharing the rest, the
// case fairness is for; a second round-robin workload has every job under one key (no turns to
// take: what the statement costs by itself).
import { measureWorkloads } from './ordering.mjs';

const WORKLOADS = {
  plain: { item: () => ({ payload: {} }) },
  'round-robin': {
    configure: (lh, queue) => lh.configureQueue(queue, { fairness: 'round-robin' }),
    item: (i) => ({ payload: {}, fairnessKey: i % 10 === 0 ? `small-${(i / 10) % 200}` : 'big' }),
  },
  'round-robin, one key': {
    configure: (lh, queue) => lh.configureQueue(queue, { fairness: 'round-robin' }),
    item: () => ({ payload: {}, fairnessKey: 'only' }),
  },
};

/** Measures plain and round-robin claims; returns a jobs/s summary of each. */
export function measureFairness(connectionString, options = {}) {
  return measureWorkloads(connectionString, WORKLOADS, options);
}
