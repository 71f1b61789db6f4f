// The raw-SQL baseline: the seed article's schema and statements, with none of Leasehold's
// validation, bookkeeping or notifications beyond what each workload needs. It lives in a schema of
// its own so that it and Leasehold never share a table, index or lock.
//
// RAW_SCHEMA is a constant of this file: it is the only identifier interpolated into SQL here.

export const RAW_SCHEMA = 'bench_raw';
export const RAW_QUEUE = 'bench';
/** The NOTIFY channel of the latency baseline. */
export const RAW_CHANNEL = 'bench_raw_wakeup';
const S = RAW_SCHEMA;

/** Drops and recreates the baseline schema (the seed's table and indexes). */
export async function createRawSchema(db) {
  await db.query(`DROP SCHEMA IF EXISTS ${S} CASCADE`);
  await db.query(`CREATE SCHEMA ${S}`);
  await db.query(`CREATE TYPE ${S}.job_status AS ENUM ('pending', 'running', 'succeeded', 'dead')`);
  await db.query(`
    CREATE TABLE ${S}.jobs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      queue_name text NOT NULL,
      payload jsonb NOT NULL,
      status ${S}.job_status NOT NULL DEFAULT 'pending',
      priority integer NOT NULL DEFAULT 0,
      available_at timestamptz NOT NULL DEFAULT now(),
      attempt_count integer NOT NULL DEFAULT 0,
      max_attempts integer NOT NULL DEFAULT 8,
      lease_owner text,
      lease_token bigint NOT NULL DEFAULT 0,
      lease_expires_at timestamptz,
      last_error_code text,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz
    )`);
  await db.query(`
    CREATE INDEX jobs_claimable_idx ON ${S}.jobs (queue_name, priority DESC, available_at, id)
    WHERE status = 'pending'`);
  await db.query(
    `CREATE INDEX jobs_expired_lease_idx ON ${S}.jobs (lease_expires_at) WHERE status = 'running'`,
  );
}

export async function truncateRaw(db) {
  await db.query(`TRUNCATE ${S}.jobs RESTART IDENTITY`);
}

// Named statements are prepared once per connection, as Leasehold's are.

/** $1 queue, $2 payload JSON. */
export const RAW_INSERT_ONE = {
  name: 'bench_raw_insert_one',
  text: `INSERT INTO ${S}.jobs (queue_name, payload) VALUES ($1, $2::jsonb)`,
};

/** $1 queue, $2 payload JSON; wakes listeners on commit (latency baseline only). */
export const RAW_INSERT_ONE_NOTIFY = {
  name: 'bench_raw_insert_one_notify',
  text: `WITH inserted AS (
           INSERT INTO ${S}.jobs (queue_name, payload) VALUES ($1, $2::jsonb) RETURNING id
         )
         SELECT id, pg_notify('${RAW_CHANNEL}', $1) FROM inserted`,
};

/** $1 queue, $2 payload JSON texts (text[]): one multi-row insert. */
export const RAW_INSERT_MANY = {
  name: 'bench_raw_insert_many',
  text: `INSERT INTO ${S}.jobs (queue_name, payload)
         SELECT $1, p::jsonb FROM unnest($2::text[]) AS p`,
};

/**
 * The seed's claim, batched: $1 queue, $2 owner, $3 limit. The update finds the locked rows by
 * `id = ANY (ARRAY(...))`, one primary-key probe each: written as the seed's join (`FROM candidate`),
 * the planner hashed a sequential scan of jobs once thousands were pending (6.5 ms a claim of 64
 * instead of well under one). The best hand-written SQL avoids that trap, as Leasehold does.
 */
export const RAW_CLAIM = {
  name: 'bench_raw_claim',
  text: `WITH candidate AS (
           SELECT id FROM ${S}.jobs
           WHERE queue_name = $1 AND status = 'pending' AND available_at <= now()
           ORDER BY priority DESC, available_at, id
           LIMIT $3
           FOR UPDATE SKIP LOCKED
         )
         UPDATE ${S}.jobs AS j
         SET status = 'running',
             attempt_count = j.attempt_count + 1,
             lease_owner = $2,
             lease_token = j.lease_token + 1,
             lease_expires_at = now() + interval '60 seconds'
         WHERE j.id = ANY (ARRAY(SELECT id FROM candidate))
         RETURNING j.id, j.lease_token, j.payload`,
};

/**
 * The seed's fenced completion, batched: $1 ids, $2 tokens, $3 owner. Looked up by
 * `id = ANY ($1)` (primary-key probes), each row's token checked against its own from the arrays:
 * joined to the unnested arrays with `status = 'running'` in the condition, the planner drove the
 * update from the partial index on running jobs and rescanned the batch for each of them (15 ms a
 * batch of 64 with 20,000 leases held).
 */
export const RAW_COMPLETE = {
  name: 'bench_raw_complete',
  text: `UPDATE ${S}.jobs AS j
         SET status = 'succeeded', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL
         WHERE j.id = ANY ($1::bigint[])
           AND (j.id, j.lease_token) IN (SELECT * FROM unnest($1::bigint[], $2::bigint[]))
           AND j.status = 'running'
           AND j.lease_owner = $3
           AND j.lease_expires_at > now()`,
};

/** Claims up to `limit` jobs; rows carry id, lease_token and payload. */
export async function rawClaim(db, owner, limit) {
  const result = await db.query({ ...RAW_CLAIM, values: [RAW_QUEUE, owner, limit] });
  return result.rows;
}

/** Completes claimed rows; throws if the fence refused any (it never should in the bench). */
export async function rawComplete(db, owner, rows) {
  const result = await db.query({
    ...RAW_COMPLETE,
    values: [rows.map((r) => r.id), rows.map((r) => r.lease_token), owner],
  });
  if (result.rowCount !== rows.length) {
    throw new Error(`raw completion accepted ${result.rowCount} of ${rows.length} jobs`);
  }
}

/** Jobs in the baseline table. */
export async function countRawJobs(db) {
  const { rows } = await db.query(`SELECT count(*)::int AS n FROM ${S}.jobs`);
  return rows[0].n;
}

/** Counts of the baseline table by status. */
export async function rawStatusCounts(db) {
  const { rows } = await db.query(
    `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
            count(*) FILTER (WHERE status <> 'succeeded')::int AS other,
            count(*) FILTER (WHERE attempt_count <> 1)::int AS not_once
     FROM ${S}.jobs`,
  );
  return rows[0];
}
