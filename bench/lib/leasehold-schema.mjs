// The bench's Leasehold schema. LEASEHOLD_SCHEMA is a constant of this file, the only identifier
// interpolated into SQL here. Between runs the schema is dropped and migrated afresh, so the bench
// does not need to know every table the library keeps; it reads only `jobs` and, where the library
// has it, `finished_jobs` (where succeeded jobs go once completed).
import { pathToFileURL } from 'node:url';

export const LEASEHOLD_SCHEMA = 'bench_leasehold';
export const LEASEHOLD_QUEUE = 'bench';
const S = LEASEHOLD_SCHEMA;

/**
 * The Leasehold build the bench runs: this tree's dist/, or the build LEASEHOLD_BENCH_DIST names
 * (an absolute path to another commit's dist/index.js: `npm run bench:ab` sets it per side, and
 * the worker processes it forks inherit it).
 */
export function leaseholdDist() {
  const other = process.env.LEASEHOLD_BENCH_DIST;
  return other ? pathToFileURL(other).href : new URL('../../dist/index.js', import.meta.url).href;
}

/** A Leasehold client on the bench schema, from the build `leaseholdDist()` names. */
export async function benchClient(connectionString, poolSize) {
  const { Leasehold } = await import(leaseholdDist());
  return new Leasehold({ connectionString, schema: LEASEHOLD_SCHEMA, poolSize });
}

/** Drops the bench schema and migrates it afresh: every run starts from empty tables. */
export async function resetLeasehold(admin, connectionString) {
  await admin.query(`DROP SCHEMA IF EXISTS ${S} CASCADE`);
  const lh = await benchClient(connectionString, 1);
  try {
    await lh.migrate();
  } finally {
    await lh.close();
  }
}

export async function dropLeasehold(admin) {
  await admin.query(`DROP SCHEMA IF EXISTS ${S} CASCADE`);
}

/** Jobs not yet finished (pending or running), for the enqueue workloads. */
export async function countLiveJobs(admin) {
  const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${S}.jobs WHERE status <> 'succeeded'`);
  return rows[0].n;
}

/**
 * What the tables show of the bench queue: succeeded jobs (in `jobs`, or moved to `finished_jobs`),
 * jobs in any other state, succeeded jobs that took more than one attempt, and fence refusals
 * (other queues' jobs, such as the feature queues of leasehold-features.mjs, are not counted).
 */
export async function leaseholdStatusCounts(admin) {
  const { rows } = await admin.query(
    `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
            count(*) FILTER (WHERE status <> 'succeeded')::int AS other,
            count(*) FILTER (WHERE attempt_count <> 1)::int AS not_once,
            (SELECT coalesce(sum(refused_count), 0)::int FROM ${S}.lease_refusals) AS refused,
            to_regclass($1) IS NOT NULL AS has_finished
     FROM ${S}.jobs WHERE queue_name = $2`,
    [`${S}.finished_jobs`, LEASEHOLD_QUEUE],
  );
  const counts = rows[0];
  if (counts.has_finished) {
    const finished = await admin.query(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE attempt_count <> 1)::int AS not_once
       FROM ${S}.finished_jobs WHERE queue_name = $1`,
      [LEASEHOLD_QUEUE],
    );
    counts.succeeded += finished.rows[0].n;
    counts.not_once += finished.rows[0].not_once;
  }
  delete counts.has_finished;
  return counts;
}
