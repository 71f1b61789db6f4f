import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  type AbortReason,
  type BatchJobContext,
  isLeaseholdError,
  type JobContext,
  LeaseLostError,
} from '../../src/index.js';
import { createWorkerMetrics } from '../../src/prometheus.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { deferred, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

/** A handler that waits until its signal aborts, and hands the test the signal's reason. */
function waitsForAbort(reasons: unknown[], running: { resolve: () => void }) {
  return (job: JobContext) =>
    new Promise<void>((resolve) => {
      running.resolve();
      job.signal.addEventListener('abort', () => {
        reasons.push(job.signal.reason);
        resolve(); // returns normally, as a handler that ignores the reason would
      });
    });
}

/** A metric's value for one queue (0 when absent). */
async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return (
    values.find((v) => Object.entries(labels).every(([k, value]) => String(v.labels[k]) === value))?.value ??
    0
  );
}

describe("why a handler was stopped: its signal's reason", () => {
  it('an operator cancel of a running job aborts with CANCELLED, counted and recorded as a cancel, not a lost lease', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id } = await lh.enqueue('cancel-me', {});
    const running = deferred();
    const reasons: unknown[] = [];
    const aborted: AbortReason[] = [];
    const losses: unknown[] = [];
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: { 'cancel-me': { leaseMs: 1500, handler: waitsForAbort(reasons, running) } },
    });
    worker.on('aborted', (_job, reason) => aborted.push(reason));
    worker.on('leaseLost', (_job, loss) => losses.push(loss));
    const { registry } = createWorkerMetrics(worker, { registry: new Registry() });
    await started(worker);
    await running.promise;
    await lh.cancel(id, { reason: 'customer closed the account', actor: 'support' });
    await waitFor(() => reasons.length === 1, { what: 'the handler told to stop' });
    const [reason] = reasons;
    expect(isLeaseholdError(reason, 'CANCELLED')).toBe(true);
    expect(reason).not.toBeInstanceOf(LeaseLostError);
    expect((reason as Error).message).toContain(`job ${id}`);
    await waitFor(() => worker.activeCount === 0, { what: 'the run ended' });
    expect(aborted).toEqual(['cancelled']);
    expect(worker.counters.cancelled).toBe(1);
    expect(losses).toEqual([]);
    expect(await metricValue(registry, 'leasehold_cancelled_runs_total', { queue: 'cancel-me' })).toBe(1);
    expect(await metricValue(registry, 'leasehold_heartbeat_failures_total', { queue: 'cancel-me' })).toBe(0);
    const job = await lh.getJob(id, { history: true });
    expect(job?.status).toBe('cancelled');
    const kinds = job!.history.map((e) => e.kind);
    expect(kinds).toContain('cancelled');
    expect(kinds).not.toContain('lease_expired');
    expect(job!.history.find((e) => e.kind === 'cancelled')).toMatchObject({
      actor: 'support',
      reason: 'customer closed the account',
      attempt: 1,
    });
  });

  it('a cancel that lands before the next renewal is told apart from a lost lease when the completion is refused', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id } = await lh.enqueue('quick', {});
    const running = deferred();
    const gate = deferred();
    const aborted: AbortReason[] = [];
    const losses: unknown[] = [];
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        quick: {
          leaseMs: 60_000, // no renewal comes before the handler returns
          handler: async () => {
            running.resolve();
            await gate.promise;
          },
        },
      },
    });
    worker.on('aborted', (_job, reason) => aborted.push(reason));
    worker.on('leaseLost', (_job, loss) => losses.push(loss));
    await started(worker);
    await running.promise;
    await lh.cancel(id, { reason: 'too late for this one' });
    gate.resolve();
    await waitFor(() => worker.counters.cancelled === 1, { what: 'the run counted as cancelled' });
    expect(aborted).toEqual(['cancelled']);
    expect(worker.counters).toMatchObject({ completed: 0, lost: 1 }); // its completion was refused
    expect(losses).toEqual([]);
    expect((await lh.getJob(id))?.status).toBe('cancelled');
  });

  it('a lease taken over by another claim aborts with LEASE_LOST', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const { id } = await lh.enqueue('taken', {});
    const running = deferred();
    const reasons: unknown[] = [];
    const aborted: AbortReason[] = [];
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: { taken: { leaseMs: 1500, handler: waitsForAbort(reasons, running) } },
    });
    worker.on('aborted', (_job, reason) => aborted.push(reason));
    worker.on('leaseLost', () => {});
    await started(worker);
    await running.promise;
    // Another claim takes the job over: the token moves on, so this worker's renewal is refused.
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET lease_token = lease_token + 1, lease_owner = 'someone-else' WHERE id = $1`,
      [id],
    );
    await waitFor(() => reasons.length === 1, { what: 'the handler told to stop' });
    expect(reasons[0]).toBeInstanceOf(LeaseLostError);
    expect(isLeaseholdError(reasons[0], 'LEASE_LOST')).toBe(true);
    expect(aborted).toEqual(['lease-lost']);
    expect(worker.counters.cancelled).toBe(0);
  });

  it('a worker stopping past its grace period aborts with SHUTDOWN, and the job is handed back', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id } = await lh.enqueue('slow', {});
    const running = deferred();
    const reasons: unknown[] = [];
    const aborted: AbortReason[] = [];
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      shutdownTimeoutMs: 50,
      queues: { slow: { leaseMs: 30_000, handler: waitsForAbort(reasons, running) } },
    });
    worker.on('aborted', (_job, reason) => aborted.push(reason));
    await started(worker);
    await running.promise;
    await worker.stop();
    expect(reasons).toHaveLength(1);
    expect(isLeaseholdError(reasons[0], 'SHUTDOWN')).toBe(true);
    expect(aborted).toEqual(['shutdown']);
    expect(await lh.getJob(id)).toMatchObject({ status: 'pending', attemptCount: 0 });
  });

  it('in a batch, a cancel of one item aborts that item alone; the others complete', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { ids } = await lh.enqueueMany('batch', [{ payload: 0 }, { payload: 1 }, { payload: 2 }]);
    const running = deferred();
    const gate = deferred();
    const reasons = new Map<string, unknown>();
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        batch: {
          leaseMs: 1500,
          batch: { size: 3, waitMs: 5000 },
          handler: async (jobs: BatchJobContext[]) => {
            for (const job of jobs)
              job.signal.addEventListener('abort', () => reasons.set(job.id, job.signal.reason));
            running.resolve();
            await gate.promise;
          },
        },
      },
    });
    await started(worker);
    await running.promise;
    await lh.cancel(ids[1]!, { reason: 'not this one' });
    await waitFor(() => reasons.size === 1, { what: "the cancelled item's signal" });
    expect([...reasons.keys()]).toEqual([ids[1]]);
    expect(isLeaseholdError(reasons.get(ids[1]!), 'CANCELLED')).toBe(true);
    gate.resolve();
    await waitFor(() => worker.activeCount === 0, { what: 'the batch ended' });
    expect(worker.counters).toMatchObject({ completed: 2, cancelled: 1 });
    const statuses = await Promise.all(ids.map(async (id) => (await lh.getJob(id))?.status));
    expect(statuses).toEqual(['succeeded', 'cancelled', 'succeeded']);
  });
});
