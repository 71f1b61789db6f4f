import { describe, expect, it } from 'vitest';
import { type JobContext, type Leasehold, LeaseLostError, ValidationError } from '../../src/index.js';
import { expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { deferred, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

/** A fake downstream that records every call it receives, by key (it does not deduplicate). */
function downstream() {
  const calls: string[] = [];
  return {
    calls,
    charge: (key: string) => {
      calls.push(key);
      return { receipt: `r-${calls.length}`, key };
    },
  };
}

/**
 * Runs `handler` in a worker (recovery off: the test decides when a lease lapses), and returns a
 * way to "crash" the first attempt: its lease is expired in database time and recovered, so the
 * next attempt runs while the first one hangs, fenced out, until its signal aborts.
 */
async function runWithCrash(lh: Leasehold, queue: string, handler: (job: JobContext) => Promise<unknown>) {
  const pool = testPool();
  const worker = lh.worker({
    queues: { [queue]: { concurrency: 2, leaseMs: 2000, handler } },
    recoveryIntervalMs: 0,
    pollIntervalMs: 20,
    shutdownTimeoutMs: 500,
  });
  await started(worker);
  return {
    worker,
    crash: async (jobId: string) => {
      await expireLease(pool, lh.schema, jobId);
      expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    },
  };
}

// A handler step that never returns by itself: the crashed attempt waits here until fenced out.
const hang = (job: JobContext) =>
  new Promise<never>((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason)));

describe('effects ledger', () => {
  it('crash after the effect and its result, before completion: the next attempt gets the result without performing again', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const api = downstream();
    const results: unknown[] = [];
    const { id } = await lh.enqueue('pay', { amount: 42 });
    const { crash } = await runWithCrash(lh, 'pay', async (job) => {
      const receipt = await job.effect('charge-card', { perform: (key) => api.charge(key) });
      results.push(receipt);
      if (job.attempt === 1) await hang(job);
    });
    await waitFor(() => results.length === 1, { what: 'the first attempt charged' });
    await crash(id);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'the retry succeeded' });
    expect(api.calls).toHaveLength(1);
    expect(api.calls[0]).toContain(':charge-card');
    expect(results).toEqual([
      { receipt: 'r-1', key: api.calls[0] },
      { receipt: 'r-1', key: api.calls[0] },
    ]);
    expect((await lh.getJob(id))?.attemptCount).toBe(2);
  });

  it('crash after the effect but before its result was recorded: reconcile finds it happened, and it is not repeated', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const api = downstream();
    const reconciled: string[] = [];
    const { id } = await lh.enqueue('pay', {});
    const { crash } = await runWithCrash(lh, 'pay', async (job) => {
      const receipt = await job.effect('charge-card', {
        perform: async (key) => {
          const r = api.charge(key);
          // The process dies here, after the charge, before the ledger hears about it.
          if (job.attempt === 1) await hang(job);
          return r;
        },
        reconcile: (key) => {
          reconciled.push(key);
          const index = api.calls.indexOf(key);
          return index === -1
            ? { happened: false }
            : { happened: true, result: { receipt: `r-${index + 1}`, key } };
        },
      });
      expect(receipt).toEqual({ receipt: 'r-1', key: api.calls[0] });
    });
    await waitFor(() => api.calls.length === 1, { what: 'the first attempt charged' });
    await crash(id);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'the retry succeeded' });
    expect(api.calls).toHaveLength(1);
    expect(reconciled).toEqual(api.calls);
  });

  it('crash before the effect reached the downstream: reconcile finds nothing, and it is performed again with the same key', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const api = downstream();
    const { id } = await lh.enqueue('pay', {});
    let attempts = 0;
    const { crash } = await runWithCrash(lh, 'pay', async (job) => {
      await job.effect('charge-card', {
        perform: async (key) => {
          attempts++;
          // The first attempt dies on its way to the downstream: the call never lands.
          if (job.attempt === 1) await hang(job);
          return api.charge(key);
        },
        reconcile: (key) =>
          api.calls.includes(key) ? { happened: true, result: null as never } : { happened: false },
      });
    });
    await waitFor(() => attempts === 1, { what: 'the first attempt started the effect' });
    await crash(id);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'the retry succeeded' });
    expect(api.calls).toHaveLength(1);
    expect(attempts).toBe(2);
  });

  it('without reconcile, an uncertain effect sends the job dead with UNCERTAIN_EFFECT instead of repeating it', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const api = downstream();
    const { id } = await lh.enqueue('pay', {}, { maxAttempts: 5 });
    let runs = 0;
    const { crash } = await runWithCrash(lh, 'pay', async (job) => {
      const run = ++runs;
      await job.effect('charge-card', {
        perform: async (key) => {
          const r = api.charge(key);
          if (run === 1) await hang(job);
          return r;
        },
      });
    });
    await waitFor(() => api.calls.length === 1, { what: 'the first attempt charged' });
    await crash(id);
    await waitFor(async () => (await lh.getJob(id))?.status === 'dead', { what: 'dead' });
    expect(api.calls).toHaveLength(1);
    const job = await lh.getJob(id, { history: true });
    expect(job).toMatchObject({ lastErrorCode: 'UNCERTAIN_EFFECT', attemptCount: 2 });
    // The crashed first holder's renewal is refused, and recorded, whenever it comes: on a loaded
    // machine after the job went dead. The last transition is the dead one.
    const transitions = job!.history.filter((event) => event.kind !== 'refused');
    expect(transitions.at(-1)).toMatchObject({ kind: 'dead', errorCode: 'UNCERTAIN_EFFECT' });
    expect(job!.lastErrorMessage).toContain('charge-card');
    // An operator who checked the downstream can replay it and have the effect performed again.
    await lh.replay([id], {
      reason: 'charge never landed: checked with the processor',
      retryUncertainEffects: true,
    });
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', {
      what: 'the replay succeeded',
    });
    expect(api.calls).toHaveLength(2);
  });

  it('an effect write after the lease was taken away is refused: LeaseLostError, nothing performed, the refusal counted', async () => {
    const lh = await migratedClient();
    const api = downstream();
    const gate = deferred();
    const errors: unknown[] = [];
    const { id } = await lh.enqueue('pay', {});
    const running = deferred();
    const worker = lh.worker({
      queues: {
        pay: async (job) => {
          running.resolve();
          await gate.promise;
          try {
            await job.effect('charge-card', { perform: (key) => api.charge(key) });
          } catch (err) {
            errors.push(err);
            throw err;
          }
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await running.promise;
    await lh.cancel(id, { reason: 'order withdrawn' });
    gate.resolve();
    await waitFor(() => errors.length === 1, { what: 'the effect refused' });
    expect(errors[0]).toBeInstanceOf(LeaseLostError);
    expect(api.calls).toEqual([]);
    expect((await lh.leaseRefusals()).map((r) => [r.queue, r.operation, r.count])).toEqual([
      ['pay', 'effect', 1],
    ]);
    const job = await lh.getJob(id, { history: true });
    expect(job!.history.at(-1)).toMatchObject({ kind: 'refused', operation: 'effect' });
  });

  it('results must be JSON and bounded, and effect names are validated', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const errors: unknown[] = [];
    await lh.enqueue('pay', {}, { maxAttempts: 1 });
    const worker = lh.worker({
      queues: {
        pay: async (job) => {
          for (const attempt of [
            () => job.effect('bad name!', { perform: () => 1 }),
            () => job.effect('huge', { perform: () => 'x'.repeat(70_000) }),
          ]) {
            await attempt().catch((err: unknown) => errors.push(err));
          }
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(() => errors.length === 2, { what: 'two refusals' });
    expect(errors.every((err) => err instanceof ValidationError)).toBe(true);
    // The oversized result was not stored: the effect is left uncertain, for reconcile.
    const { rows } = await pool.query(`SELECT name, result_at FROM "${lh.schema}".job_effects`);
    expect(rows).toEqual([{ name: 'huge', result_at: null }]);
  });
});

describe('a worker that reclaims its own job', () => {
  it('still aborts the earlier, fenced-out run at that run’s own deadline', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const reasons: (string | undefined)[] = [];
    let runs = 0;
    const { id } = await lh.enqueue('again', {});
    const worker = lh.worker({
      queues: {
        again: {
          concurrency: 2,
          // 1 s: the second run's completion must land within its lease on a loaded machine too.
          leaseMs: 1000,
          // No renewals to be refused: the earlier run can only end at its own deadline.
          renew: 'progress',
          handler: async (job) => {
            if (++runs > 1) return;
            await new Promise<void>((resolve) => job.signal.addEventListener('abort', () => resolve()));
            reasons.push((job as JobContext & { abortReason?: string }).abortReason);
          },
        },
      },
      recoveryIntervalMs: 0,
      pollIntervalMs: 20,
      shutdownTimeoutMs: 5000,
    });
    await started(worker);
    await waitFor(() => runs === 1, { what: 'the first run' });
    await expireLease(pool, lh.schema, id);
    await lh.recoverExpired();
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'the second run' });
    await waitFor(() => reasons.length === 1, { what: 'the first run aborted' });
    expect(reasons).toEqual(['lease-deadline']);
  });
});
