// Workload 4: wake-up latency of an idle worker. Jobs are enqueued one at a time; each sample is
// the time from the enqueue call's start to its handler's start, both read in this process on the
// same monotonic clock. The next job is enqueued only after the previous handler started, plus a
// pause, so samples do not queue behind one another.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { benchClient, LEASEHOLD_QUEUE, resetLeasehold } from '../lib/leasehold-schema.mjs';
import { deadline, sleep, withTimeout } from '../lib/limits.mjs';
import {
  RAW_CHANNEL,
  RAW_INSERT_ONE_NOTIFY,
  RAW_QUEUE,
  rawClaim,
  rawComplete,
  truncateRaw,
} from '../lib/raw-sql.mjs';
import { median, percentile, summarize } from '../lib/stats.mjs';

// The first samples pay for connecting and preparing statements; they are dropped on both sides.
const WARMUP_SAMPLES = 10;
const SAMPLE_TIMEOUT_MS = 5000;

/** Tracks when each job was enqueued and when its handler started. */
function sampler() {
  const enqueuedAt = new Map();
  const waiting = new Map();
  const samples = [];
  return {
    samples,
    enqueuing(seq) {
      enqueuedAt.set(seq, performance.now());
      return new Promise((resolve) => waiting.set(seq, resolve));
    },
    handlerStarted(seq) {
      const now = performance.now();
      const started = enqueuedAt.get(seq);
      if (started === undefined) return;
      enqueuedAt.delete(seq);
      if (seq >= WARMUP_SAMPLES) samples.push(now - started);
      waiting.get(seq)?.();
      waiting.delete(seq);
    },
  };
}

/** Enqueues `total` jobs one after another with `enqueue(seq)`, each awaited to its handler start. */
async function drive(s, total, pauseMs, enqueue, limit) {
  for (let seq = 0; seq < total; seq++) {
    limit.check();
    const started = s.enqueuing(seq);
    await enqueue(seq);
    await withTimeout(started, SAMPLE_TIMEOUT_MS, `latency sample ${seq}: handler start`);
    if (pauseMs > 0) await sleep(pauseMs);
  }
}

function summarizeLatency(samples) {
  return {
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    p99: percentile(samples, 99),
    n: samples.length,
  };
}

async function waitFor(check, what) {
  const limit = deadline(10_000, what);
  while (!check()) {
    limit.check();
    await sleep(5);
  }
}

/** Leasehold's side alone (the build `leaseholdDist()` names): { p50, p95, p99, n } in ms. */
export async function leaseholdLatency(ctx, options) {
  await resetLeasehold(ctx.admin, ctx.connectionString);
  const s = sampler();
  const producer = await benchClient(ctx.connectionString, 1);
  const consumer = await benchClient(ctx.connectionString);
  const worker = consumer.worker({
    listen: true,
    queues: {
      [LEASEHOLD_QUEUE]: {
        handler: async (job) => s.handlerStarted(job.payload.seq),
        concurrency: options.concurrency,
      },
    },
  });
  try {
    await worker.start();
    await waitFor(() => worker.listenerPid !== null, 'Leasehold listener connecting');
    const limit = deadline(options.timeoutMs, 'Leasehold latency');
    await drive(
      s,
      options.latencySamples + WARMUP_SAMPLES,
      options.latencyPauseMs,
      (seq) => producer.enqueue(LEASEHOLD_QUEUE, { seq }),
      limit,
    );
  } finally {
    await worker.stop();
    await consumer.close();
    await producer.close();
  }
  return summarizeLatency(s.samples);
}

async function rawLatency(ctx, options) {
  await truncateRaw(ctx.admin);
  const s = sampler();
  const owner = `raw-latency:${randomBytes(4).toString('hex')}`;
  const producer = new pg.Pool({ connectionString: ctx.connectionString, max: 1 });
  const consumer = new pg.Pool({ connectionString: ctx.connectionString, max: 2 });
  const listener = new pg.Client({ connectionString: ctx.connectionString });
  const errors = [];
  // One claim at a time; a notification arriving meanwhile asks for one more claim afterwards.
  let claiming = false;
  let again = false;
  const claim = async () => {
    if (claiming) {
      again = true;
      return;
    }
    claiming = true;
    try {
      do {
        again = false;
        const rows = await rawClaim(consumer, owner, options.concurrency);
        for (const row of rows) s.handlerStarted(row.payload.seq);
        if (rows.length > 0) rawComplete(consumer, owner, rows).catch((err) => errors.push(err));
      } while (again);
    } catch (err) {
      errors.push(err);
    } finally {
      claiming = false;
    }
  };
  try {
    await listener.connect();
    listener.on('notification', () => void claim());
    await listener.query(`LISTEN ${RAW_CHANNEL}`);
    const limit = deadline(options.timeoutMs, 'raw latency');
    await drive(
      s,
      options.latencySamples + WARMUP_SAMPLES,
      options.latencyPauseMs,
      (seq) => producer.query({ ...RAW_INSERT_ONE_NOTIFY, values: [RAW_QUEUE, JSON.stringify({ seq })] }),
      limit,
    );
    await waitFor(() => !claiming, 'raw latency: last claim');
  } finally {
    await listener.end();
    await consumer.end();
    await producer.end();
  }
  if (errors.length > 0) throw new Error(`raw latency baseline: ${errors[0].message}`);
  return summarizeLatency(s.samples);
}

/**
 * Both sides, `options.reps` times, alternating which goes first (one side alone on a noisy host
 * measured whatever the host did meanwhile; a single run of 300 samples put p99, its third-worst
 * sample, anywhere from 1.5 to 4.5 ms above the baseline's). Returns, per side, the median over the
 * repetitions of each percentile with its min–max (`{ median, min, max, runs }` as `summarize`),
 * and `p99Gap`: the median over the repetitions of Leasehold's p99 minus the baseline's, in ms,
 * each repetition's two sides measured back to back.
 */
export async function measureLatency(ctx, options) {
  const runs = { leasehold: [], baseline: [] };
  for (let rep = 0; rep < options.reps; rep++) {
    const order = rep % 2 === 0 ? ['leasehold', 'baseline'] : ['baseline', 'leasehold'];
    for (const side of order) {
      runs[side].push(
        side === 'leasehold' ? await leaseholdLatency(ctx, options) : await rawLatency(ctx, options),
      );
    }
  }
  const acrossReps = (side) =>
    Object.fromEntries(['p50', 'p95', 'p99'].map((p) => [p, summarize(runs[side].map((run) => run[p]))]));
  return {
    leasehold: acrossReps('leasehold'),
    baseline: acrossReps('baseline'),
    p99Gap: median(runs.leasehold.map((run, rep) => run.p99 - runs.baseline[rep].p99)),
  };
}
