import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, inject, onTestFinished } from 'vitest';
import { Leasehold, type LeaseholdOptions } from '../../src/index.js';
import { checkInSchema, checkOutSchema, dropSchemaAndRoles, schemaFingerprint } from './schema-pool.js';

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
 * Without a schema named, the schema may be one an earlier test of this run used, emptied and found
 * unchanged in its definition (./schema-pool.ts): to the test it is as migrate() left it. Fails the
 * file if a pool it made is left open.
 */
export async function migratedClient(options: Omit<LeaseholdOptions, 'schema'> & { schema?: string } = {}) {
  const fromPool =
    options.schema === undefined ? await checkOutSchema(await poolClient(), inject('runId')) : null;
  const schema = options.schema ?? fromPool?.schema ?? uniqueSchema();
  const lh = new Leasehold({ connectionString: databaseUrl(), ...options, schema });
  // Closing twice (a test's own close, then the file's cleanup) ends the pool once.
  const close = lh.close.bind(lh);
  let closed: Promise<void> | undefined;
  lh.close = () => {
    closed ??= close();
    return closed;
  };
  await lh.migrate();
  // A schema this call migrated afresh is fingerprinted now, before the test touches it.
  const fingerprint =
    fromPool?.fingerprint ??
    (options.schema === undefined ? await schemaFingerprint(await poolClient(), schema) : null);
  cleanups.push(async () => {
    await lh.close();
    const reused =
      fingerprint !== null && (await checkInSchema(await poolClient(), inject('runId'), schema, fingerprint));
    if (!reused) await dropSchema(schema);
  });
  return lh;
}

/**
 * Ends `lh`'s pool when the current test finishes (its schema stays until the file's end): for
 * tests that open many connections each, which a server of 100 connections (the system
 * PostgreSQL's default) could not hold for a whole file.
 */
export function closeAfterTest<T extends { close(): Promise<void> }>(lh: T): T {
  onTestFinished(() => lh.close());
  return lh;
}

let schemaPoolClient: Promise<pg.Client> | undefined;

/** This file's connection for the schema pool's bookkeeping, ended after everything else. */
function poolClient(): Promise<pg.Client> {
  schemaPoolClient ??= (async () => {
    const client = new pg.Client({ connectionString: directDatabaseUrl() });
    await client.connect();
    cleanups.unshift(() => client.end());
    return client;
  })();
  return schemaPoolClient;
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
  await dropSchemaAndRoles(databaseUrl(), schema);
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
