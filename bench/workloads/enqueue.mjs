// Workloads 1 and 2: enqueue throughput, Leasehold against raw INSERTs on the same server.
// Repetitions rotate which side goes first, so no side always meets a warmer server.
import pg from 'pg';
import { bullmqQueue, redisAnswers } from '../lib/bullmq-side.mjs';
import { benchClient, countLiveJobs, LEASEHOLD_QUEUE, resetLeasehold } from '../lib/leasehold-schema.mjs';
import { deadline, withTimeout } from '../lib/limits.mjs';
import {
  countRawJobs,
  RAW_INSERT_MANY,
  RAW_INSERT_ONE,
  RAW_INSERT_ONE_NOTIFY,
  RAW_QUEUE,
  truncateRaw,
} from '../lib/raw-sql.mjs';
import { summarize } from '../lib/stats.mjs';

const PAYLOAD = { kind: 'bench' };
const PAYLOAD_JSON = JSON.stringify(PAYLOAD);

/** Runs `callers` concurrent loops that together call `step(i)` for i = 0..count-1. */
async function concurrentLoop(count, callers, step, limit) {
  let next = 0;
  const caller = async () => {
    while (next < count) {
      limit.check();
      const i = next++;
      await step(i);
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));
}

/** Times `body` and returns jobs per second. */
async function timed(jobs, body) {
  const startedAt = performance.now();
  await body();
  return jobs / ((performance.now() - startedAt) / 1000);
}

async function expectJobs(count, jobs, what) {
  const n = await count();
  if (n !== jobs) throw new Error(`${what}: expected ${jobs} jobs in the table, found ${n}`);
}

/**
 * A measured side: reset its store, time `body`, then check the store holds exactly `jobs`. `kind`
 * is 'leasehold', 'raw', or a store of its own ({ reset, count }: BullMQ's Redis).
 */
function side(ctx, kind, jobs, body, what) {
  const results = [];
  const measure = async (limit) => {
    if (kind === 'leasehold') await resetLeasehold(ctx.admin, ctx.connectionString);
    else if (kind === 'raw') await truncateRaw(ctx.admin);
    else await kind.reset();
    results.push(await timed(jobs, () => body(limit)));
    await expectJobs(
      () =>
        kind === 'leasehold'
          ? countLiveJobs(ctx.admin)
          : kind === 'raw'
            ? countRawJobs(ctx.admin)
            : kind.count(),
      jobs,
      what,
    );
  };
  return { measure, results };
}

/**
 * Workload 1: one job per call from `callers` concurrent callers. Besides the plain INSERT
 * baseline it measures INSERT + pg_notify, which is what Leasehold's enqueue does, so the table
 * shows how much of the gap is the notification rather than the library. When Redis answers
 * (REDIS_URL, default 127.0.0.1:6379) BullMQ's `queue.add()` runs as a side too (issue 39).
 */
export async function measureEnqueueOne(ctx, options) {
  const { enqueueJobs: jobs, enqueueCallers: callers } = options;
  const bullmq = (await redisAnswers()) ? await bullmqQueue() : null;
  // Every side gets one connection per caller, so none waits for a pooled connection.
  const lh = await benchClient(ctx.connectionString, callers);
  const raw = new pg.Pool({ connectionString: ctx.connectionString, max: callers });
  const insert = (statement) => () => raw.query({ ...statement, values: [RAW_QUEUE, PAYLOAD_JSON] });
  const sides = {
    leasehold: side(
      ctx,
      'leasehold',
      jobs,
      (limit) => concurrentLoop(jobs, callers, () => lh.enqueue(LEASEHOLD_QUEUE, PAYLOAD), limit),
      'Leasehold enqueue',
    ),
    raw: side(
      ctx,
      'raw',
      jobs,
      (limit) => concurrentLoop(jobs, callers, insert(RAW_INSERT_ONE), limit),
      'raw INSERT',
    ),
    rawNotify: side(
      ctx,
      'raw',
      jobs,
      (limit) => concurrentLoop(jobs, callers, insert(RAW_INSERT_ONE_NOTIFY), limit),
      'raw INSERT + pg_notify',
    ),
  };
  if (bullmq) {
    sides.bullmq = side(
      ctx,
      bullmq,
      jobs,
      (limit) => concurrentLoop(jobs, callers, () => bullmq.add(PAYLOAD), limit),
      'BullMQ queue.add',
    );
  }
  try {
    await rotate(sides, options, 'enqueue one at a time');
  } finally {
    await lh.close();
    await raw.end();
    await bullmq?.reset();
    await bullmq?.close();
  }
  return {
    leasehold: summarize(sides.leasehold.results),
    baseline: summarize(sides.raw.results),
    baselineWithNotify: summarize(sides.rawNotify.results),
    bullmq: bullmq ? summarize(sides.bullmq.results) : null,
  };
}

/** Workload 2: batches of `manyBatch` from one caller. */
export async function measureEnqueueMany(ctx, options) {
  const { manyJobs: jobs, manyBatch: batch } = options;
  const lh = await benchClient(ctx.connectionString, 1);
  const raw = new pg.Pool({ connectionString: ctx.connectionString, max: 1 });
  const batches = Math.ceil(jobs / batch);
  const sizeOf = (b) => Math.min(batch, jobs - b * batch);
  const sides = {
    leasehold: side(
      ctx,
      'leasehold',
      jobs,
      (limit) =>
        concurrentLoop(
          batches,
          1,
          (b) =>
            lh.enqueueMany(
              LEASEHOLD_QUEUE,
              Array.from({ length: sizeOf(b) }, () => ({ payload: PAYLOAD })),
            ),
          limit,
        ),
      'Leasehold enqueueMany',
    ),
    raw: side(
      ctx,
      'raw',
      jobs,
      (limit) =>
        concurrentLoop(
          batches,
          1,
          // Each payload serialised, as a caller's code would (Leasehold's side serialises each too).
          (b) =>
            raw.query({
              ...RAW_INSERT_MANY,
              values: [RAW_QUEUE, Array.from({ length: sizeOf(b) }, () => JSON.stringify(PAYLOAD))],
            }),
          limit,
        ),
      'raw multi-row insert',
    ),
  };
  try {
    await rotate(sides, options, 'enqueueMany');
  } finally {
    await lh.close();
    await raw.end();
  }
  return { leasehold: summarize(sides.leasehold.results), baseline: summarize(sides.raw.results) };
}

/** Runs every side `reps` times; repetition r starts with side r mod n. */
async function rotate(sides, { reps, timeoutMs }, what) {
  const names = Object.keys(sides);
  for (let rep = 0; rep < reps; rep++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(rep + k) % names.length];
      const label = `${what} (${name}, run ${rep + 1})`;
      await withTimeout(sides[name].measure(deadline(timeoutMs, label)), timeoutMs, label);
    }
  }
}
