// Plain jobs must not pay for flows: claim + complete of plain jobs with this build against another
// build (BASE_DIST, e.g. the commit before flows, built in a folder of its own) and the raw-SQL
// baseline, rounds interleaved in one run; medians of 5, as ratios.
// `npm run build && BASE_DIST=/path/to/old/dist node bench/flows-plain.mjs`
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createRawSchema, RAW_INSERT_MANY, RAW_QUEUE, rawClaim, rawComplete } from './lib/raw-sql.mjs';
import { openServer } from './lib/server.mjs';
import { median } from './lib/stats.mjs';

const JOBS = 20_000;
const CLAIMERS = 4;
const BATCH = 100;
const ROUNDS = 5;
const base = process.env.BASE_DIST;
if (!base) throw new Error('set BASE_DIST to the dist/ folder of the build to compare with');
const builds = {
  current: (await import('../dist/index.js')).Leasehold,
  base: (await import(`${base}/index.js`)).Leasehold,
};

async function drain(claim, complete) {
  let done = 0;
  const claimer = async (n) => {
    let empty = 0;
    while (done < JOBS && empty < 200) {
      const rows = await claim(n);
      if (rows.length === 0) {
        empty++;
        await new Promise((resolve) => setTimeout(resolve, 1));
        continue;
      }
      empty = 0;
      await complete(n, rows);
      done += rows.length;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CLAIMERS }, (_, n) => claimer(n)));
  if (done !== JOBS) throw new Error(`${done} of ${JOBS} done`);
  return JOBS / ((performance.now() - started) / 1000);
}

async function leasehold(connectionString, name, round) {
  const schema = `bench_plain_${name}_${round}`;
  const lh = new builds[name]({ connectionString, schema, poolSize: CLAIMERS + 2 });
  await lh.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await lh.migrate();
  for (let i = 0; i < JOBS; i += 5000) {
    await lh.enqueueMany(
      'bench',
      Array.from({ length: 5000 }, () => ({ payload: {} })),
    );
  }
  await lh.pool.query(`VACUUM ANALYZE "${schema}".jobs`);
  const rate = await drain(
    (n) => lh.claim({ queue: 'bench', owner: `c${n}`, limit: BATCH }),
    (_n, leases) => lh.completeMany(leases),
  );
  await lh.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  await lh.close();
  return rate;
}

async function raw(connectionString) {
  const pool = new pg.Pool({ connectionString, max: CLAIMERS + 2 });
  await createRawSchema(pool);
  await pool.query({ ...RAW_INSERT_MANY, values: [RAW_QUEUE, Array.from({ length: JOBS }, () => '{}')] });
  await pool.query('VACUUM ANALYZE bench_raw.jobs');
  const rate = await drain(
    (n) => rawClaim(pool, `c${n}`, BATCH),
    (n, rows) => rawComplete(pool, `c${n}`, rows),
  );
  await pool.query('DROP SCHEMA bench_raw CASCADE');
  await pool.end();
  return rate;
}

const server = await openServer({ settings: {} });
try {
  const rates = { raw: [], base: [], current: [] };
  for (let round = 0; round < ROUNDS; round++) {
    rates.raw.push(await raw(server.connectionString));
    const order = round % 2 === 0 ? ['base', 'current'] : ['current', 'base'];
    for (const name of order) rates[name].push(await leasehold(server.connectionString, name, round));
  }
  console.log(
    `plain claim + complete, ${JOBS} jobs, ${CLAIMERS} claimers, batches of ${BATCH}, median of ${ROUNDS}`,
  );
  for (const name of ['raw', 'base', 'current']) {
    const m = median(rates[name]);
    console.log(
      `${name.padEnd(8)} ${m.toFixed(0).padStart(7)} jobs/s   ratio to raw ${(m / median(rates.raw)).toFixed(2)}   ratio to base ${(m / median(rates.base)).toFixed(2)}   runs ${rates[name].map((r) => r.toFixed(0)).join(' ')}`,
    );
  }
} finally {
  await server.stop();
}
process.exit(0);
