import { expect } from 'vitest';
import type { LeaseLoss } from '../../src/runtime/run/lease-loss.js';
import { migratedClient, waitFor } from './db.js';
import { started } from './worker.js';

/**
 * Runs one job whose handler takes `runMs` and never calls `job.progress()` or looks at its
 * signal, on a worker at its defaults (only `leaseMs` may be given), and checks that it succeeds
 * exactly once: one claim, one run, no abort, no lost lease, renewed along the way.
 */
export async function expectLongHandlerSucceedsOnce(options: {
  runMs: number;
  leaseMs?: number;
}): Promise<void> {
  const lh = await migratedClient();
  const { id } = await lh.enqueue('long', { runMs: options.runMs });
  let runs = 0;
  const aborted: string[] = [];
  const losses: LeaseLoss[] = [];
  const worker = lh.worker({
    queues: {
      long: {
        ...(options.leaseMs !== undefined && { leaseMs: options.leaseMs }),
        handler: async () => {
          runs++;
          await new Promise((resolve) => setTimeout(resolve, options.runMs));
        },
      },
    },
  });
  worker.on('aborted', (job, reason) => aborted.push(`${job.id}:${reason}`));
  worker.on('leaseLost', (_job, loss) => losses.push(loss));
  await started(worker);
  const startedAt = Date.now();
  await waitFor(() => worker.counters.completed + worker.counters.lost + worker.counters.retried > 0, {
    timeoutMs: options.runMs + 60_000,
    intervalMs: 200,
    what: 'the long job to finish',
  });
  expect(Date.now() - startedAt).toBeGreaterThanOrEqual(options.runMs - 1000);
  await worker.stop();
  expect({ runs, aborted, losses }).toEqual({ runs: 1, aborted: [], losses: [] });
  expect(worker.counters).toMatchObject({ claimed: 1, completed: 1, lost: 0, retried: 0, dead: 0 });
  const job = await lh.getJob(id);
  expect(job).toMatchObject({ status: 'succeeded', attemptCount: 1 });
  expect((await lh.getJob(id, { history: true }))?.history.map((event) => event.kind)).toEqual([
    'enqueued',
    'claimed',
    'completed',
  ]);
  // Renewed about every third of a lease while the handler's promise was pending.
  const leaseMs = options.leaseMs ?? 30_000;
  const { rows } = await lh.pool.query<{ lease_extensions: number }>(
    `SELECT lease_extensions FROM "${lh.schema}".finished_jobs WHERE id = $1`,
    [id],
  );
  expect(rows[0]?.lease_extensions).toBeGreaterThanOrEqual(Math.floor(options.runMs / leaseMs));
}
