// bench:ab's enqueue workload (issue 39): one side's `lh.enqueue()` from 16 concurrent callers
// (jobs/s, every job checked present once) and a single caller's per-call latency, one call at a
// time (p50/p99 ms). Each side is a build's dist/index.js, loaded into this process; each run
// migrates a schema of its own from nothing.
import { percentile } from '../lib/stats.mjs';

const SCHEMA = 'bench_ab_enqueue';
const PAYLOAD = { kind: 'bench' };
const WARMUP_CALLS = 200;

async function freshClient(mod, connectionString, admin, poolSize) {
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  const lh = new mod.Leasehold({ connectionString, schema: SCHEMA, poolSize });
  await lh.migrate();
  return lh;
}

/** `jobs` enqueues from `callers` concurrent loops: jobs/s; throws unless every job is stored once. */
export async function enqueueThroughput(mod, { connectionString, admin, jobs, callers }) {
  const lh = await freshClient(mod, connectionString, admin, callers);
  try {
    let next = 0;
    const ids = new Set();
    const caller = async () => {
      while (next < jobs) {
        next++;
        ids.add((await lh.enqueue('ab', PAYLOAD)).id);
      }
    };
    const startedAt = performance.now();
    await Promise.all(Array.from({ length: callers }, caller));
    const rate = jobs / ((performance.now() - startedAt) / 1000);
    const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${SCHEMA}.jobs`);
    if (ids.size !== jobs || rows[0].n !== jobs)
      throw new Error(`enqueue: ${jobs} calls gave ${ids.size} ids and ${rows[0].n} stored jobs`);
    return rate;
  } finally {
    await lh.close();
  }
}

/**
 * Bulk enqueue: `jobs` jobs by `enqueueMany` calls of `batch` each, one call at a time (the bench's
 * "many" workload): jobs/s; throws unless every job is stored once.
 */
export async function bulkThroughput(mod, { connectionString, admin, jobs, batch }) {
  const lh = await freshClient(mod, connectionString, admin, 2);
  try {
    const items = Array.from({ length: batch }, (_, i) => ({ payload: { ...PAYLOAD, i } }));
    let stored = 0;
    const startedAt = performance.now();
    for (let done = 0; done < jobs; done += batch) {
      stored += (await lh.enqueueMany('ab', items.slice(0, Math.min(batch, jobs - done)))).ids.length;
    }
    const rate = jobs / ((performance.now() - startedAt) / 1000);
    const { rows } = await admin.query(`SELECT count(DISTINCT id)::int AS n FROM ${SCHEMA}.jobs`);
    if (stored !== jobs || rows[0].n !== jobs)
      throw new Error(`bulk enqueue: ${jobs} jobs gave ${stored} ids and ${rows[0].n} stored jobs`);
    return rate;
  } finally {
    await lh.close();
  }
}

/** `calls` enqueues from one caller, one at a time, after a warm-up: per-call latency p50/p99 in ms. */
export async function singleCallerLatency(mod, { connectionString, admin, calls }) {
  const lh = await freshClient(mod, connectionString, admin, 16);
  try {
    for (let i = 0; i < WARMUP_CALLS; i++) await lh.enqueue('ab', PAYLOAD);
    const samples = [];
    for (let i = 0; i < calls; i++) {
      const startedAt = performance.now();
      await lh.enqueue('ab', PAYLOAD);
      samples.push(performance.now() - startedAt);
    }
    return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
  } finally {
    await lh.close();
  }
}

/** Drops the workload's schema. */
export async function dropEnqueueSchema(admin) {
  await admin.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
}
