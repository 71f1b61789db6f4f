// The harness's own tables, in schema `chaos` beside Leasehold's, on the server the harness controls.
//
// Why the ledger (schema `chaos`) lives in the same PostgreSQL: each row is a short autocommit statement with
// synchronous_commit on, so once a handler saw its insert return, the row survives a worker's
// SIGKILL and PostgreSQL's own `stop -m immediate` (WAL is flushed at commit). Every time in it is
// the database's clock_timestamp() at insert, never a worker's clock (one worker's clock is skewed
// on purpose). Its writes go through a pool of their own, so faults aimed at Leasehold's connections
// do not hit the instrument; PostgreSQL outages do, and the writers retry (see ledger-writer.mjs).
// The failover rig (failover.mjs) is the exception: its primary is replaced, so the ledger lives on a
// third server and is copied to the new primary before the checker runs. `claim_id` (the lease's
// random claim id) is what tells the old primary's lost claims from the new primary's reissues.

/** Creates the harness tables (the server is fresh: nothing to migrate). */
export async function createChaosSchema(db) {
  await db.query(`
    CREATE SCHEMA chaos;
    -- One row per handler run, written before the handler does anything else.
    CREATE TABLE chaos.runs (
      seq text UNIQUE NOT NULL, job_id bigint NOT NULL, token bigint NOT NULL, owner text NOT NULL, queue text NOT NULL,
      attempt int NOT NULL, max_attempts int NOT NULL, started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      claim_id text
    );
    -- How a run ended: its duration on the worker's monotonic clock (so the end is started_at +
    -- duration, whenever this row got written) and what the handler did.
    CREATE TABLE chaos.run_ends (
      seq text UNIQUE NOT NULL, job_id bigint NOT NULL, token bigint NOT NULL, owner text NOT NULL,
      duration_ms double precision NOT NULL, outcome text NOT NULL,
      written_at timestamptz NOT NULL DEFAULT clock_timestamp(), claim_id text
    );
    -- Outcome answers as the worker (or the manual claimer) received them from Leasehold.
    CREATE TABLE chaos.acks (
      seq text UNIQUE NOT NULL, job_id bigint NOT NULL, token bigint NOT NULL, owner text NOT NULL, result text NOT NULL,
      written_at timestamptz NOT NULL DEFAULT clock_timestamp(), claim_id text
    );
    -- The fake downstream: every call is logged; the effect is applied once per idempotency key.
    -- job_ref is the producer's reference of the job that called (payload.ref, unique per enqueue):
    -- what tells two jobs apart when a failover gave both one id (the checker's shared keys).
    CREATE TABLE chaos.downstream_calls (
      key text NOT NULL, job_id bigint NOT NULL, token bigint NOT NULL, owner text NOT NULL, kind text NOT NULL,
      at timestamptz NOT NULL DEFAULT clock_timestamp(), claim_id text, job_ref text
    );
    CREATE TABLE chaos.downstream_applied (key text PRIMARY KEY, job_id bigint NOT NULL);
    -- Written inside the completion transaction of the manual claimers (lh.complete(lease, { client })).
    CREATE TABLE chaos.txn_effects (
      job_id bigint NOT NULL, token bigint NOT NULL, owner text NOT NULL,
      at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    -- Bumped by worker handlers inside job.transaction (mode 'counter'): one row per job, n bumps,
    -- token of the claim whose transaction bumped it last.
    CREATE TABLE chaos.counters (job_id bigint PRIMARY KEY, n int NOT NULL, token bigint NOT NULL);
    -- Enqueues the producer saw acknowledged, and faults the nemesis injected (written at the end).
    -- A waiting workflow (--steps with --event-pct) adds the key it waits on and when its event is sent.
    CREATE TABLE chaos.acked (job_id bigint PRIMARY KEY, queue text NOT NULL, mode text NOT NULL, delay_ms int NOT NULL,
      event_key text, event_plan text);
    CREATE TABLE chaos.faults (
      id int PRIMARY KEY, kind text NOT NULL, target text, injected_at timestamptz NOT NULL,
      healed_at timestamptz NOT NULL, detail jsonb NOT NULL DEFAULT '{}'
    );
    -- The rate-limited-queue mode (harness/rate-limits.mjs): a handler's start, written before it works, and
    -- its end, written before it returns (so before its completion): both database time.
    CREATE TABLE chaos.limited_runs (
      seq text UNIQUE NOT NULL, job_id bigint NOT NULL, token bigint NOT NULL, owner text NOT NULL,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE TABLE chaos.limited_ends (
      seq text UNIQUE NOT NULL, job_id bigint NOT NULL, token bigint NOT NULL, owner text NOT NULL,
      ended_at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    -- The steps workload (--steps, steps-checker.mjs): each run of a step's side effect, committed
    -- before the step's value is returned to job.step (so before the step can be recorded), with
    -- the claim that ran it and the value the step then returns (unique per run).
    CREATE TABLE chaos.step_effects (
      job_id bigint NOT NULL, step text NOT NULL, token bigint NOT NULL, claim_id text, owner text NOT NULL,
      value text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX ON chaos.step_effects (job_id, step);
    CREATE INDEX ON chaos.runs (job_id, token);
    CREATE INDEX ON chaos.run_ends (job_id, token);
    CREATE INDEX ON chaos.acks (job_id);
    CREATE INDEX ON chaos.downstream_calls (key);
    CREATE INDEX ON chaos.txn_effects (job_id);
  `);
}

/**
 * The columns of each ledger table the workers write in batches. The first, `seq`, is unique per
 * row as the writer made it: a batch retried after its commit's answer was lost (a connection cut
 * at commit) is then not recorded twice, while two genuine records of one fact still would be.
 */
export const LEDGER_TABLES = {
  runs: ['seq', 'job_id', 'token', 'owner', 'queue', 'attempt', 'max_attempts', 'claim_id'],
  run_ends: ['seq', 'job_id', 'token', 'owner', 'duration_ms', 'outcome', 'claim_id'],
  acks: ['seq', 'job_id', 'token', 'owner', 'result', 'claim_id'],
  limited_runs: ['seq', 'job_id', 'token', 'owner'],
  limited_ends: ['seq', 'job_id', 'token', 'owner'],
};

/** One INSERT of `rows` (arrays in column order) into ledger table `table`, as a parameterised query. */
export function ledgerInsert(table, rows) {
  const columns = LEDGER_TABLES[table];
  if (!columns) throw new Error(`chaos: no ledger table ${table}`);
  const values = [];
  const tuples = rows.map((row) => {
    const refs = row.map((value) => {
      values.push(value);
      return `$${values.length}`;
    });
    return `(${refs.join(', ')})`;
  });
  return {
    text: `INSERT INTO chaos.${table} (${columns.join(', ')}) VALUES ${tuples.join(', ')} ON CONFLICT (seq) DO NOTHING`,
    values,
  };
}
