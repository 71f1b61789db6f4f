import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/index.js';
import { nextSweepWaitMs, RecoveryService, sweepInGrowingBatches } from '../../src/maintenance/recovery.js';
import { msUntilNextLeaseExpiry, probeLeaseLapses } from '../../src/storage/leases/recover.js';
import {
  countByStatus,
  expireLease,
  listenOptions,
  migratedClient,
  testPool,
  waitFor,
} from '../support/db.js';
import { statementsSentOn } from '../support/statement-spy.js';
import { started } from '../support/worker.js';

// The wait the service plans before its next pass, for a given state (the service's own interval
// jitter is ±25%, as PeriodicService draws it).
function plannedWait(passes: number, nextLapseInMs: number | null): number {
  const intervalMs = 10_000;
  return nextSweepWaitMs({
    passes,
    intervalMs,
    jitteredIntervalMs: intervalMs * (0.75 + Math.random() * 0.5),
    nextLapseInMs,
  });
}

describe('when the recovery sweep runs', () => {
  it('plans its first pass at once, then just after the next lease lapses, never sooner than a tenth of its interval nor later than the interval', async () => {
    expect(plannedWait(0, null)).toBeLessThanOrEqual(50);
    const soon = plannedWait(1, 3000);
    expect(soon).toBeGreaterThan(3000);
    expect(soon).toBeLessThanOrEqual(3020);
    // a lease about to be renewed just in time must not make the sweep spin
    expect(plannedWait(2, 20)).toBe(1000);
    // nothing running: the jittered interval
    const idle = plannedWait(3, null);
    expect(idle).toBeGreaterThanOrEqual(7500);
    expect(idle).toBeLessThanOrEqual(12_500);
    // never later than the interval
    expect(plannedWait(4, 60_000)).toBeLessThanOrEqual(12_500);
  });

  it('reads the next lapse in database time from the running leases, and null when none runs', async () => {
    const lh = await migratedClient();
    expect(await msUntilNextLeaseExpiry(lh.pool, lh.schema)).toBeNull();
    await lh.enqueueMany('lapse', [{ payload: 1 }, { payload: 2 }]);
    await lh.claim({ queue: 'lapse', owner: 'a', leaseMs: 600_000 });
    await lh.claim({ queue: 'lapse', owner: 'b', leaseMs: 60_000 });
    const ms = await msUntilNextLeaseExpiry(lh.pool, lh.schema);
    expect(ms).toBeGreaterThan(50_000);
    expect(ms).toBeLessThanOrEqual(60_000);
  });

  it('a pass that finds no lapsed lease sends one read and moves nothing, and says when the next lease lapses; a lapsed lease is swept in the pass that finds it', async () => {
    const lh = await migratedClient();
    const spy = statementsSentOn(lh.pool);
    const service = new RecoveryService({
      db: spy.pool,
      schema: lh.schema,
      intervalMs: 10_000,
      backoff: { baseMs: 0, maxMs: 0 },
      followLapses: true,
    });
    // Nothing running: one probe, no sweep.
    expect(await service.runOnce()).toEqual({ retried: 0, dead: 0 });
    expect(spy.labels()).toEqual(['lease_lapse_probe']);
    // Two live leases: still one probe, which also says when the earlier of them lapses.
    const [early] = (await lh.enqueueMany('probe', [{ payload: 1 }, { payload: 2 }])).ids;
    await lh.claim({ queue: 'probe', owner: 'a', leaseMs: 600_000, limit: 1 });
    await lh.claim({ queue: 'probe', owner: 'b', leaseMs: 60_000, limit: 1 });
    spy.clear();
    expect(await service.runOnce()).toEqual({ retried: 0, dead: 0 });
    expect(spy.labels()).toEqual(['lease_lapse_probe']);
    const probe = await probeLeaseLapses(spy.pool, lh.schema);
    expect(probe.lapsed).toBe(false);
    expect(probe.nextLapseInMs).toBeGreaterThan(50_000);
    expect(probe.nextLapseInMs).toBeLessThanOrEqual(60_000);
    // One lapsed lease: the same pass sweeps it, then reads the next lapse.
    await expireLease(spy.pool, lh.schema, early as string);
    spy.clear();
    expect(await service.runOnce()).toEqual({ retried: 1, dead: 0 });
    expect(spy.labels()).toEqual(['lease_lapse_probe', 'recover_expired_leases', 'lease_next_expiry']);
    expect((await countByStatus(spy.pool, lh.schema)).pending).toBe(1);
  });

  it('sweeps in batches that double from 1,000 to 4,000 until one comes back short', async () => {
    let left = 10_500;
    const asked: number[] = [];
    const total = await sweepInGrowingBatches(async (limit) => {
      asked.push(limit);
      const moved = Math.min(limit, left);
      left -= moved;
      return { retried: moved, dead: 0 };
    });
    expect(asked).toEqual([1000, 2000, 4000, 4000]);
    expect(total).toEqual({ retried: 10_500, dead: 0 });
  });
});

describe('what the worker sweep gives back', () => {
  it('refuses a bad recovery backoff with a ValidationError before anything is written', async () => {
    const lh = await migratedClient();
    await expect(lh.recoverExpired({ backoff: { baseMs: -1 } })).rejects.toThrow(ValidationError);
    await expect(lh.recoverExpired({ backoff: { baseMs: 10, maxMs: 5 } })).rejects.toMatchObject({
      code: 'VALIDATION',
    });
    expect(() =>
      lh.worker({ queues: { q: async () => {} }, recoveryBackoff: { baseMs: 'soon' as unknown as number } }),
    ).toThrow(ValidationError);
  });

  it('returns expired leases with a short backoff by default (within 100 ms), not the client’s failure backoff', async () => {
    const lh = await migratedClient(); // client backoff at its default: first retry within 1 s
    const pool = testPool(2);
    await lh.enqueueMany(
      'crashed',
      Array.from({ length: 20 }, (_, i) => ({ payload: i })),
    );
    await lh.claim({ queue: 'crashed', owner: 'dead-worker', limit: 20, leaseMs: 60_000 });
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET lease_expires_at = now() - interval '1 second' WHERE status = 'running'`,
    );
    const worker = lh.worker({ queues: { other: { handler: async () => {} } } });
    await started(worker);
    await waitFor(() => worker.counters.recovered === 20, { what: 'the sweep' });
    const { rows } = await pool.query<{ n: number; longest: number }>(
      `SELECT count(*)::int AS n, max(delay_ms)::float8 AS longest
       FROM "${lh.schema}".job_events WHERE kind = 'lease_expired'`,
    );
    expect(rows[0]!.n).toBe(20);
    expect(rows[0]!.longest).toBeLessThanOrEqual(100);
  });

  it('an idle worker runs jobs its sweep returned with a backoff when they come due, without waiting for its poll', async () => {
    const lh = await migratedClient(listenOptions());
    const pool = testPool(2);
    await lh.enqueueMany(
      'backedoff',
      Array.from({ length: 20 }, (_, i) => ({ payload: i })),
    );
    await lh.claim({ queue: 'backedoff', owner: 'dead-worker', limit: 20, leaseMs: 60_000 });
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET lease_expires_at = now() - interval '1 second' WHERE status = 'running'`,
    );
    const worker = lh.worker({
      queues: { backedoff: { handler: async () => {} } },
      pollIntervalMs: 3_600_000, // only the sweep's wake-ups can start the jobs
      // Twenty random waits up to 500 ms: the notification at the sweep's commit finds most of
      // them not yet due.
      recoveryBackoff: { baseMs: 500, maxMs: 500 },
    });
    await started(worker);
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 20, {
      timeoutMs: 15_000,
      what: 'every recovered job run',
    });
    expect(worker.counters.recovered).toBe(20);
  });
});
