// The raw-SQL baseline on the processing workload: the best hand-written SQL for the same state
// machine, with no feature of Leasehold's. Per process, claims keep a local buffer of claimed jobs
// topped up (the seed's SKIP LOCKED claim, `rawClaimBatch` at a time, each with a fenced lease; up
// to IN_FLIGHT claims in flight), the `concurrency` handler slots take jobs from that buffer, and
// finished jobs are completed together: one fenced UPDATE per flush of everything finished so
// far, up to IN_FLIGHT flushes in flight. This is what a user
// writing their own batched worker would write (issue 28: a weak baseline hid a regression).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { sleep } from '../../lib/limits.mjs';
import {
  createRawSchema,
  RAW_INSERT_MANY,
  RAW_QUEUE,
  RAW_SCHEMA,
  rawClaim,
  rawComplete,
  rawStatusCounts,
  truncateRaw,
} from '../../lib/raw-sql.mjs';

export const label = 'raw SQL';
const LOAD_BATCH = 5000;
// An empty claim (drained, or every candidate locked by a peer) waits this long before the next.
const IDLE_WAIT_MS = 5;
// Claim statements, and completion statements, in flight at once per process.
const IN_FLIGHT = 4;

export function available() {
  return null;
}

export function setup(ctx) {
  return createRawSchema(ctx.admin);
}

export async function load(ctx, jobs) {
  await truncateRaw(ctx.admin);
  for (let done = 0; done < jobs; done += LOAD_BATCH) {
    const size = Math.min(LOAD_BATCH, jobs - done);
    await ctx.admin.query({ ...RAW_INSERT_MANY, values: [RAW_QUEUE, Array(size).fill('{}')] });
  }
  return {};
}

export async function tableShowsDone(ctx, _run, jobs) {
  return (await rawStatusCounts(ctx.admin)).succeeded === jobs;
}

export async function verify(ctx, _run, jobs) {
  const counts = await rawStatusCounts(ctx.admin);
  if (counts.succeeded !== jobs || counts.other !== 0 || counts.not_once !== 0) {
    throw new Error(
      `raw SQL: expected ${jobs} jobs succeeded once each, table shows ${JSON.stringify(counts)}`,
    );
  }
}

export async function teardown(ctx) {
  await ctx.admin.query(`DROP SCHEMA IF EXISTS ${RAW_SCHEMA} CASCADE`);
}

export async function prepareWorker({ connectionString, concurrency, rawClaimBatch, onHandled, onError }) {
  const owner = `raw:${process.pid}:${randomBytes(4).toString('hex')}`;
  // Claims and completions in flight at once: a commit waits for the WAL to reach the disk, so one
  // statement at a time of each would leave the handlers waiting on the disk's sync time.
  const pool = new pg.Pool({ connectionString, max: 2 * IN_FLIGHT });
  pool.on('error', onError);
  // Connect now, so the start signal measures work, not connecting.
  const clients = await Promise.all(Array.from({ length: 2 * IN_FLIGHT }, () => pool.connect()));
  for (const client of clients) client.release();

  const noop = async () => {};
  let running = false;
  const buffer = []; // claimed rows not yet started
  const idleSlots = []; // resolvers of slots waiting for a row
  let done = []; // finished rows not yet completed
  let claiming = 0; // claim statements in flight
  const flushes = new Set(); // completion statements in flight
  let retryAt = 0; // after an empty claim, no claim before this time
  let retryTimer = null;
  let loops = [];

  const wakeSlots = (count) => {
    for (let i = 0; i < count && idleSlots.length > 0; i++) idleSlots.shift()();
  };
  // Keeps the buffer and the claims in flight at IN_FLIGHT claims' worth.
  const topUp = () => {
    while (
      running &&
      claiming < IN_FLIGHT &&
      buffer.length + claiming * rawClaimBatch < IN_FLIGHT * rawClaimBatch
    ) {
      const wait = retryAt - performance.now();
      if (wait > 0) {
        retryTimer ??= setTimeout(() => {
          retryTimer = null;
          topUp();
        }, wait);
        return;
      }
      claiming++;
      rawClaim(pool, owner, rawClaimBatch).then(
        (rows) => {
          claiming--;
          if (rows.length === 0) retryAt = performance.now() + IDLE_WAIT_MS;
          buffer.push(...rows);
          wakeSlots(rows.length);
          topUp();
        },
        (err) => {
          claiming--;
          onError(err);
          retryAt = performance.now() + 50;
          topUp();
        },
      );
    }
  };
  // A fenced completion of everything finished so far, when fewer than IN_FLIGHT are in flight.
  const flush = () => {
    while (done.length > 0 && flushes.size < IN_FLIGHT) {
      const rows = done;
      done = [];
      const sent = rawComplete(pool, owner, rows)
        .catch(onError)
        .finally(() => {
          flushes.delete(sent);
          flush();
        });
      flushes.add(sent);
    }
  };
  const slot = async () => {
    while (running) {
      const row = buffer.shift();
      if (!row) {
        await new Promise((resolve) => idleSlots.push(resolve));
        continue;
      }
      topUp();
      await noop();
      onHandled(1);
      done.push(row);
      flush();
    }
  };
  return {
    start() {
      running = true;
      loops = Array.from({ length: concurrency }, slot);
      topUp();
    },
    async stop() {
      running = false;
      clearTimeout(retryTimer);
      wakeSlots(idleSlots.length);
      await Promise.all(loops);
      while (claiming > 0 || flushes.size > 0) await sleep(5);
      flush();
      while (flushes.size > 0) await Promise.all(flushes);
      await pool.end();
      return {};
    },
  };
}
