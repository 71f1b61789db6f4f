// Leasehold on the processing workload: jobs pre-enqueued with enqueueMany, then drained by
// `lh.worker()` with a no-op handler, at the library's default settings except concurrency
// (and prefetch, in the leasehold-prefetch variant).
import {
  benchClient,
  dropLeasehold,
  LEASEHOLD_QUEUE,
  leaseholdStatusCounts,
  resetLeasehold,
} from '../../lib/leasehold-schema.mjs';

export const label = 'Leasehold';
const LOAD_BATCH = 5000;

export function available() {
  return null;
}

export function setup(ctx) {
  return resetLeasehold(ctx.admin, ctx.connectionString);
}

export async function load(ctx, jobs) {
  await resetLeasehold(ctx.admin, ctx.connectionString);
  const lh = await benchClient(ctx.connectionString, 2);
  try {
    for (let done = 0; done < jobs; done += LOAD_BATCH) {
      const size = Math.min(LOAD_BATCH, jobs - done);
      await lh.enqueueMany(
        LEASEHOLD_QUEUE,
        Array.from({ length: size }, () => ({ payload: {} })),
      );
    }
  } finally {
    await lh.close();
  }
  return {};
}

export async function tableShowsDone(ctx, _run, jobs) {
  const counts = await leaseholdStatusCounts(ctx.admin);
  return counts.succeeded === jobs;
}

export async function verify(ctx, _run, jobs) {
  const counts = await leaseholdStatusCounts(ctx.admin);
  if (counts.succeeded !== jobs || counts.other !== 0 || counts.not_once !== 0 || counts.refused !== 0) {
    throw new Error(
      `Leasehold: expected ${jobs} jobs succeeded once each, table shows ${JSON.stringify(counts)}`,
    );
  }
}

export function teardown(ctx) {
  return dropLeasehold(ctx.admin);
}

/**
 * `prefetch` > 0 claims that many jobs ahead of free slots (unset: the library's adaptive default);
 * `jobMs` > 0 makes each handler wait that long.
 */
export async function prepareWorker({
  connectionString,
  concurrency,
  prefetch = 0,
  leaseholdClaimBatchSize = 0,
  jobMs = 0,
  onHandled,
  onError,
}) {
  const lh = await benchClient(connectionString);
  await lh.pool.query('SELECT 1'); // connect before the start signal
  const worker = lh.worker({
    ...(leaseholdClaimBatchSize > 0 ? { claimBatchSize: leaseholdClaimBatchSize } : {}),
    queues: {
      [LEASEHOLD_QUEUE]: {
        handler:
          jobMs > 0
            ? async () => {
                await new Promise((resolve) => setTimeout(resolve, jobMs));
                onHandled(1);
              }
            : async () => {
                onHandled(1);
              },
        concurrency,
        // Passed only when asked for, so the bench still runs a library without the option.
        ...(prefetch > 0 ? { prefetch } : {}),
      },
    },
  });
  worker.on('error', onError);
  return {
    start: () => worker.start(),
    async stop() {
      await worker.stop();
      await lh.close();
      return { ...worker.counters };
    },
  };
}
