import { describe, expect, it } from 'vitest';
import type { Logger } from '../../src/index.js';
import type { LeaseLoss } from '../../src/runtime/run/lease-loss.js';
import { migratedClient, waitFor } from '../support/db.js';
import { expectLongHandlerSucceedsOnce } from '../support/long-handler.js';
import { deferred, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

function busyWait(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // The event loop is blocked: no timer, no I/O, no lease renewal.
  }
}

function warnings(): { logger: Logger; warned: { obj: Record<string, unknown>; msg: string | undefined }[] } {
  const warned: { obj: Record<string, unknown>; msg: string | undefined }[] = [];
  const ignore = () => {};
  return {
    logger: { debug: ignore, info: ignore, error: ignore, warn: (obj, msg) => warned.push({ obj, msg }) },
    warned,
  };
}

describe('renewal under the worker defaults', () => {
  it('a handler that runs past several lease lengths without progress() succeeds exactly once', async () => {
    // The defaults but a 2 s lease: three lease lengths. test/slow/ runs 90 s under the real 30 s lease.
    await expectLongHandlerSucceedsOnce({ runMs: 6000, leaseMs: 2000 });
  });

  it('a handler that blocks its event loop past its lease is reported once, loudly, and its result fenced off', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id } = await lh.enqueue('blocking', {});
    const { logger, warned } = warnings();
    const losses: LeaseLoss[] = [];
    const worker = lh.worker({
      logger,
      recoveryIntervalMs: 100,
      pollIntervalMs: 50,
      queues: {
        blocking: {
          leaseMs: 1000,
          handler: async (job) => {
            if (job.attempt === 1) busyWait(2500); // synchronous work longer than the lease
          },
        },
      },
    });
    worker.on('leaseLost', (_job, loss) => losses.push(loss));
    await started(worker);
    const job = await waitFor(async () => {
      const j = await lh.getJob(id);
      return j?.status === 'succeeded' ? j : null;
    });
    // The first run's completion was never written: the second attempt's is the one that landed.
    expect(job.attemptCount).toBe(2);
    expect((await lh.getJob(id, { history: true }))?.history.map((event) => event.kind)).toEqual([
      'enqueued',
      'claimed',
      'lease_expired',
      'claimed',
      'completed',
    ]);
    expect(worker.counters).toMatchObject({ lost: 1, completed: 1 });
    expect(losses).toHaveLength(1);
    expect(losses[0]).toMatchObject({ jobId: id, attempt: 1, reason: 'lease-deadline' });
    expect(losses[0]?.timerLateMs).toBeGreaterThanOrEqual(1000);
    expect(losses[0]?.message).toMatch(new RegExp(`^job ${id} .*event loop was blocked for about \\d+ ms`));
    // One warn line for the run, with the job id and what to change.
    expect(warned).toEqual([
      {
        obj: expect.objectContaining({ jobId: id, attempt: 1, reason: 'lease-deadline' }),
        msg: `leasehold: ${losses[0]?.message}`,
      },
    ]);
    expect(warned[0]?.msg).toMatch(/move CPU-bound or synchronous work off the main thread/);
  });

  it('a handler that ignores its aborted signal past maxRuntimeMs is timed out, reported once and as stuck, and its late result dropped', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id } = await lh.enqueue('hanging', {});
    const release = deferred();
    let runs = 0;
    const losses: LeaseLoss[] = [];
    const stuck: string[] = [];
    const worker = lh.worker({
      recoveryIntervalMs: 100,
      pollIntervalMs: 50,
      queues: {
        hanging: {
          // Defaults otherwise: renewed while it runs, so only the runtime cap can end it (well
          // before its lease could lapse, even if no renewal got through under load).
          leaseMs: 2000,
          maxRuntimeMs: 1000,
          concurrency: 1,
          handler: async () => {
            runs++;
            if (runs === 1) await release.promise; // ignores job.signal
          },
        },
      },
    });
    worker.on('leaseLost', (_job, loss) => losses.push(loss));
    worker.on('stuck', (job) => stuck.push(job.id));
    await started(worker);
    await waitFor(() => stuck.length > 0, { what: 'stuck event' });
    expect(stuck).toEqual([id]);
    expect(losses.map((loss) => [loss.jobId, loss.reason])).toEqual([[id, 'max-runtime']]);
    expect(losses[0]?.message).toMatch(/raise maxRuntimeMs for queue hanging/);
    // Recorded as a retryable time-out at once; the only slot stays taken by the stuck handler.
    const timedOut = await lh.getJob(id);
    expect(timedOut).toMatchObject({ status: 'pending', lastErrorCode: 'TIMEOUT' });
    expect(runs).toBe(1);
    release.resolve();
    const job = await waitFor(async () => {
      const j = await lh.getJob(id);
      return j?.status === 'succeeded' ? j : null;
    });
    expect(job.attemptCount).toBe(2);
    expect((await lh.getJob(id, { history: true }))?.history.map((event) => event.kind)).toEqual([
      'enqueued',
      'claimed',
      'retried',
      'claimed',
      'completed',
    ]);
    expect(worker.counters).toMatchObject({ stuck: 1, retried: 1, completed: 1, lost: 0 });
    expect(losses).toHaveLength(1);
  });

  it('without a logger or a leaseLost listener, a lost lease becomes a process warning, once per run', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id } = await lh.enqueue('unwatched', {});
    const seen: Error[] = [];
    const onWarning = (warning: Error) => {
      if ((warning as { code?: string }).code === 'LEASEHOLD_LEASE_LOST') seen.push(warning);
    };
    process.on('warning', onWarning);
    try {
      const worker = lh.worker({
        recoveryIntervalMs: 100,
        pollIntervalMs: 50,
        queues: {
          unwatched: {
            leaseMs: 1000,
            handler: async (job) => {
              if (job.attempt === 1) busyWait(2500);
            },
          },
        },
      });
      await started(worker);
      await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded');
      await worker.stop();
    } finally {
      process.off('warning', onWarning);
    }
    expect(seen.map((w) => [w.name, w.message.startsWith(`leasehold: job ${id} `)])).toEqual([
      ['LeaseholdWarning', true],
    ]);
  });
});
