import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Leasehold } from '../../src/index.js';
import { createStatsMetrics } from '../../src/prometheus.js';
import { databaseUrl, migratedClient, uniqueSchema } from '../support/db.js';

describe('database metrics', () => {
  it('say leasehold_up 1 and type the refusal count as a counter', async () => {
    const lh = await migratedClient();
    await lh.enqueue('metered', {});
    const [lease] = await lh.claim({ queue: 'metered', owner: 'a' });
    await lh.complete(lease!);
    expect(await lh.complete(lease!)).toBe(false); // a stale write: one refusal counted
    const text = await createStatsMetrics(lh).metrics();
    expect(text).toMatch(/^leasehold_up 1$/m);
    expect(text).toMatch(/^# TYPE leasehold_lease_refusals_total counter$/m);
    expect(text).toMatch(/^leasehold_lease_refusals_total\{queue="metered",operation="complete"\} 1$/m);
    expect(text).toMatch(/^leasehold_stats_window_seconds \d+/m);
  });

  it("keep a drained queue's series, zeros and its completions in the window (issue 38)", async () => {
    const lh = await migratedClient();
    await lh.enqueueMany('drained', [{ payload: 1 }, { payload: 2 }]);
    for (const lease of await lh.claim({ queue: 'drained', owner: 'a', limit: 10 })) {
      expect(await lh.complete(lease)).toBe(true);
    }
    // A throughput graph keeps its series while the queue is idle and well.
    const text = await createStatsMetrics(lh, { registry: new Registry() }).metrics();
    expect(text).toMatch(/^leasehold_queue_pending_jobs\{queue="drained"\} 0$/m);
    expect(text).toMatch(/^leasehold_queue_running_jobs\{queue="drained"\} 0$/m);
    expect(text).toMatch(/^leasehold_queue_completed_in_window\{queue="drained"\} 2$/m);
  });

  it('answer leasehold_up 0, without queue series, when the statistics cannot be read', async () => {
    // A schema that was never migrated: the database answers, with an error.
    const lh = new Leasehold({ connectionString: databaseUrl(), schema: uniqueSchema() });
    const errors: unknown[] = [];
    try {
      const text = await createStatsMetrics(lh, { onError: (err) => errors.push(err) }).metrics();
      expect(text).toMatch(/^leasehold_up 0$/m);
      expect(text).not.toMatch(/^leasehold_queue_/m);
      expect(errors).toHaveLength(1);
    } finally {
      await lh.close();
    }
  });
});
