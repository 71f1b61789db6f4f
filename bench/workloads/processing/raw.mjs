// The raw-SQL baseline on the processing workload: `concurrency` loops per process, each claiming
// a batch with the seed's SKIP LOCKED statement and completing it with one fenced UPDATE.
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
  const pool = new pg.Pool({ connectionString, max: concurrency });
  pool.on('error', onError);
  // Connect every loop's connection now, so the start signal measures work, not connecting.
  const clients = await Promise.all(Array.from({ length: concurrency }, () => pool.connect()));
  for (const client of clients) client.release();

  const noop = async () => {};
  let running = false;
  let loops = [];
  const loop = async () => {
    while (running) {
      try {
        const rows = await rawClaim(pool, owner, rawClaimBatch);
        if (rows.length === 0) {
          await sleep(IDLE_WAIT_MS);
          continue;
        }
        await Promise.all(rows.map(() => noop()));
        onHandled(rows.length);
        await rawComplete(pool, owner, rows);
      } catch (err) {
        onError(err);
        await sleep(50);
      }
    }
  };
  return {
    start() {
      running = true;
      loops = Array.from({ length: concurrency }, loop);
    },
    async stop() {
      running = false;
      await Promise.all(loops);
      await pool.end();
      return {};
    },
  };
}
