import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, inject } from 'vitest';
import { Leasehold, type LeaseholdOptions } from '../../src/index.js';

/**
 * What the tests connect through: the server (embedded, or DATABASE_URL), or, with
 * LEASEHOLD_TEST_PGBOUNCER=1, a transaction-pooling PgBouncer in front of it.
 */
export function databaseUrl(): string {
  return inject('databaseUrl');
}

/** The server itself, for what needs a session: LISTEN, session settings and locks, pg_backend_pid. */
export function directDatabaseUrl(): string {
  return inject('directDatabaseUrl');
}

/** True when the tests run behind a transaction-pooling PgBouncer. */
export function pooled(): boolean {
  return inject('pooled');
}

/** A fresh, unique schema name for one test file or test. */
export function uniqueSchema(prefix = 'lh_test'): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

// Behind the pooler, every client these tests make (and every CLI, example or worker process they
// start) is told so as an operator would tell theirs: unnamed statements, workers that poll unless
// given a direct connection to LISTEN on. See docs/operators-guide.md.
if (pooled()) process.env.LEASEHOLD_POOLER = 'transaction';

const cleanups: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * The client options of a test about LISTEN wake-ups: behind a pooler, the workers listen on a
 * direct connection of their own, as the docs tell operators to. Empty otherwise.
 */
export function listenOptions(): Pick<LeaseholdOptions, 'listenConnectionString'> {
  return pooled() ? { listenConnectionString: directDatabaseUrl() } : {};
}

/**
 * A migrated Leasehold client on a schema of its own, dropped (with the pool ended) after the file.
 * Fails the file if a pool it made is left open.
 */
export async function migratedClient(options: Omit<LeaseholdOptions, 'schema'> & { schema?: string } = {}) {
  const schema = options.schema ?? uniqueSchema();
  const lh = new Leasehold({ connectionString: databaseUrl(), ...options, schema });
  await lh.migrate();
  cleanups.push(async () => {
    await lh.close();
    await dropSchema(schema);
  });
  return lh;
}

/** A plain pg pool for direct SQL in tests, ended after the file. */
export function testPool(max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl(), max });
  pool.on('error', () => {});
  cleanups.push(() => pool.end());
  return pool;
}

/**
 * Drops a schema and everything in it, and the roles migration 016 made for it (roles are the
 * server's: on a shared one they would outlive the schema). The default schema's roles carry 006's
 * cluster-wide names, which global-setup.ts cleans up instead.
 */
export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    if (schema !== 'leasehold') {
      for (const kind of ['producer', 'worker', 'admin']) {
        // Refused (2BP01) only while something else still depends on it: then global-setup's sweep.
        await client.query(`DROP ROLE IF EXISTS "${schema}_${kind}"`).catch((err: { code?: string }) => {
          if (err.code !== '2BP01') throw err;
        });
      }
    }
  } finally {
    await client.end();
  }
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes (then throws). */
export async function waitFor<T>(
  check: () => Promise<T> | T,
  { timeoutMs = 10_000, intervalMs = 20, what = 'condition' } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Moves a job's lease expiry into the past, in database time (instead of sleeping through it). */
export async function expireLease(pool: pg.Pool, schema: string, jobId: string): Promise<void> {
  await pool.query(
    `UPDATE "${schema}".jobs SET lease_expires_at = now() - interval '1 millisecond' WHERE id = $1 AND status = 'running'`,
    [jobId],
  );
}

/** Counts a schema's jobs by status (succeeded ones live in finished_jobs). */
export async function countByStatus(pool: pg.Pool, schema: string): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ status: string; n: number }>(
    `SELECT status::text, count(*)::int AS n FROM "${schema}".jobs GROUP BY status
     UNION ALL
     SELECT 'succeeded', count(*)::int FROM "${schema}".finished_jobs HAVING count(*) > 0`,
  );
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}
