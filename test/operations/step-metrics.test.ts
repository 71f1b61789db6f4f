import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createStatsMetrics } from '../../src/prometheus.js';
import { migratedClient, waitFor } from '../support/db.js';

// Durable steps in the statistics and the Prometheus gauges: the steps and sleeps recorded within
// the window, per queue, apart from the transitions (retries, deaths, expiries).

describe('step outcomes in stats and metrics', () => {
  it('count the steps and sleeps recorded within the window per queue, not as transitions', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('signup', {});
    await lh.enqueue('plain', {});
    const worker = lh.worker({
      queues: {
        signup: async (job) => {
          await job.step('create', () => 1);
          await job.step('mail', () => 2);
          await job.sleep('nap', 0); // recorded, already due: the handler goes on
          await job.step('welcome', () => 3);
        },
        plain: async () => {},
      },
      pollIntervalMs: 50,
    });
    await worker.start();
    try {
      await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', {
        what: 'the workflow succeeded',
      });
      await waitFor(() => worker.counters.completed === 2, { what: 'both jobs completed' });
    } finally {
      await worker.stop();
    }
    const stats = await lh.stats();
    expect(stats.steps).toEqual([
      { queue: 'signup', kind: 'sleep', count: 1 },
      { queue: 'signup', kind: 'step', count: 3 },
    ]);
    expect(stats.transitions).toEqual([]);
    const text = await createStatsMetrics(lh, { registry: new Registry() }).metrics();
    expect(text).toMatch(/^leasehold_queue_steps_in_window\{queue="signup",kind="step"\} 3$/m);
    expect(text).toMatch(/^leasehold_queue_steps_in_window\{queue="signup",kind="sleep"\} 1$/m);
    expect(text).not.toMatch(/^leasehold_queue_steps_in_window\{queue="plain"/m);
    // Outside a window that ended before the steps: none counted.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await lh.stats({ windowMs: 1 })).steps).toEqual([]);
  });
});
