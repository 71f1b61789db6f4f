import { Registry, register } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { PermanentError, RetryableError } from '../../src/index.js';
import { createWorkerMetrics } from '../../src/prometheus.js';
import { expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { deferred, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

/** The value of one sample of a metric, by exact labels (0 when absent). */
async function sample(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  const found = values.find(
    (v) =>
      Object.keys(labels).length === Object.keys(v.labels).filter((k) => k !== 'le').length &&
      Object.entries(labels).every(([k, value]) => String(v.labels[k]) === value) &&
      !('le' in v.labels),
  );
  return found?.value ?? 0;
}

/** A histogram's observation count for the given labels. */
async function histogramCount(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  const count = values.find(
    (v) =>
      (v as { metricName?: string }).metricName === `${name}_count` &&
      Object.entries(labels).every(([k, value]) => String(v.labels[k]) === value),
  );
  return count?.value ?? 0;
}

describe('worker metrics (prom-client)', () => {
  it('counts known transitions exactly: claims, completions, retries by code and attempt, deaths, latencies', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    await lh.enqueueMany('metered', [
      { payload: { kind: 'ok' } },
      { payload: { kind: 'ok' } },
      { payload: { kind: 'ok' } },
      { payload: { kind: 'flaky' } },
      { payload: { kind: 'doomed' } },
    ]);
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        metered: {
          concurrency: 2,
          handler: async (job) => {
            const { kind } = job.payload as { kind: string };
            if (kind === 'flaky' && job.attempt === 1)
              throw new RetryableError('try again', { code: 'FLAKY' });
            if (kind === 'doomed') throw new PermanentError('never', { code: 'DOOMED' });
          },
        },
      },
    });
    const metrics = createWorkerMetrics(worker, { pool: lh.pool, registry: new Registry() });
    const { registry } = metrics;
    await started(worker);
    await waitFor(() => worker.counters.completed === 4 && worker.counters.dead === 1, {
      what: 'four completions and one death',
    });
    await worker.stop();

    const q = { queue: 'metered' };
    expect(await sample(registry, 'leasehold_jobs_claimed_total', q)).toBe(6);
    expect(await sample(registry, 'leasehold_jobs_completed_total', q)).toBe(4);
    expect(await sample(registry, 'leasehold_job_outcomes_total', { ...q, outcome: 'completed' })).toBe(4);
    expect(await sample(registry, 'leasehold_job_outcomes_total', { ...q, outcome: 'retry' })).toBe(1);
    expect(await sample(registry, 'leasehold_job_outcomes_total', { ...q, outcome: 'dead' })).toBe(1);
    expect(
      await sample(registry, 'leasehold_job_retries_total', { ...q, error_code: 'FLAKY', attempt: '1' }),
    ).toBe(1);
    expect(await sample(registry, 'leasehold_jobs_dead_total', { ...q, error_code: 'DOOMED' })).toBe(1);
    expect(await sample(registry, 'leasehold_lost_fence_total', q)).toBe(0);
    expect(await histogramCount(registry, 'leasehold_claim_latency_seconds', q)).toBe(6);
    expect(
      await histogramCount(registry, 'leasehold_completion_latency_seconds', { ...q, outcome: 'completed' }),
    ).toBe(4);
    expect(
      await histogramCount(registry, 'leasehold_claim_query_duration_seconds', q),
    ).toBeGreaterThanOrEqual(2);
    expect(
      await histogramCount(registry, 'leasehold_outcome_flush_duration_seconds', { operation: 'complete' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      await histogramCount(registry, 'leasehold_outcome_flush_duration_seconds', { operation: 'fail' }),
    ).toBeGreaterThanOrEqual(1);
    // Gauges of the present: nothing runs after stop; 2 slots; the pool is reported.
    expect(await sample(registry, 'leasehold_worker_slots', { owner: worker.owner })).toBe(2);
    expect(await sample(registry, 'leasehold_worker_busy_slots', { owner: worker.owner })).toBe(0);
    expect(await sample(registry, 'leasehold_worker_saturation', { owner: worker.owner })).toBe(0);
    expect(
      await sample(registry, 'leasehold_pool_connections', { owner: worker.owner, state: 'waiting' }),
    ).toBe(0);
    const text = await registry.metrics();
    expect(text).toContain('# TYPE leasehold_claim_latency_seconds histogram');
    // Labels never carry job ids or payloads.
    expect(text).not.toMatch(/flaky|doomed|job_id/);
    metrics.close();
  });

  it('reports saturation while handlers run, and a lost fence when a stale worker completes', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const { id } = await lh.enqueue('slow', {});
    const gate = deferred();
    const running = deferred();
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        slow: {
          concurrency: 4,
          leaseMs: 60_000,
          handler: async () => {
            running.resolve();
            await gate.promise;
          },
        },
      },
    });
    const { registry } = createWorkerMetrics(worker, { registry: new Registry() });
    await started(worker);
    await running.promise;
    expect(await sample(registry, 'leasehold_worker_busy_slots', { owner: worker.owner })).toBe(1);
    expect(await sample(registry, 'leasehold_worker_saturation', { owner: worker.owner })).toBe(0.25);
    // Another process recovers the lease behind this worker's back: its completion is refused.
    await expireLease(pool, lh.schema, id);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    const lost = new Promise<void>((resolve) => worker.once('outcome', () => resolve()));
    gate.resolve();
    await lost;
    expect(worker.counters.lost).toBe(1);
    expect(await sample(registry, 'leasehold_lost_fence_total', { queue: 'slow' })).toBe(1);
    expect(await sample(registry, 'leasehold_job_outcomes_total', { queue: 'slow', outcome: 'lost' })).toBe(
      1,
    );
  });

  it('lets several workers share one registry', async () => {
    const lh = await migratedClient();
    const a = lh.worker({ queues: { shared: { handler: async () => {} } } });
    const b = lh.worker({ queues: { shared: { handler: async () => {} } } });
    // Without a registry, the metrics go to prom-client's default one: the app's own /metrics.
    const first = createWorkerMetrics(a);
    expect(first.registry).toBe(register);
    const second = createWorkerMetrics(b, { registry: first.registry });
    expect(second.registry).toBe(first.registry);
    expect(await sample(first.registry, 'leasehold_worker_slots', { owner: a.owner })).toBeGreaterThan(0);
    expect(await sample(first.registry, 'leasehold_worker_slots', { owner: b.owner })).toBeGreaterThan(0);
  });
});
