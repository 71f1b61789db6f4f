import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/embedded.js';
import { startCatalogVacuum } from './catalog-vacuum.js';
import { dropUnusedRoles, existingRoles, GROUP_ROLES, schemaRoles } from './cluster-roles.js';
import { startPgBouncer } from './pgbouncer.js';
import { createSchemaPool, dropSchemaAndRoles, takeAllPooled } from './schema-pool.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** What the tests and the library connect through: the server, or PgBouncer in front of it. */
    databaseUrl: string;
    /** The server itself, for what needs a session of its own (LISTEN, session settings). */
    directDatabaseUrl: string;
    /** True when `databaseUrl` is a transaction-pooling PgBouncer. */
    pooled: boolean;
    /** This run's key in the free list of emptied, reusable schemas (./schema-pool.ts). */
    runId: string;
  }
}

/**
 * The tests' own server: room for every file's pools, and no fsync. A test checks what the library
 * does, not that the disk keeps a commit through a power cut; on a machine whose disk syncs slowly,
 * waiting for syncs made every test that writes many times slower (in CI, a test of a few
 * statements took 9 s that takes 0.5 s here; CREATE INDEX alone syncs each new index, some sixty
 * per migrate). Killing this server's processes loses nothing even so: the operating system still
 * holds what was written. The tests that crash a server on purpose start their own
 * (restartable-postgres.ts), with its defaults.
 */
const TEST_SERVER_SETTINGS = { max_connections: '300', fsync: 'off', full_page_writes: 'off' };

// Server connections PgBouncer may not take: the tests' direct connections and the reserved ones.
const DIRECT_CONNECTIONS = 60;

/**
 * Starts one embedded PostgreSQL for the whole run unless DATABASE_URL names a server to use.
 * With LEASEHOLD_TEST_PGBOUNCER=1, the tests then connect through a PgBouncer in transaction
 * pooling mode started in front of that server. Test files isolate themselves in schemas of their
 * own (see ./db.ts).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stops: (() => Promise<void>)[] = [];
  const teardown = async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
  };
  try {
    let direct = process.env.DATABASE_URL;
    if (!direct) {
      const server = await startEmbeddedPostgres({ settings: TEST_SERVER_SETTINGS });
      stops.push(() => server.stop());
      direct = server.connectionString;
    } else {
      // A shared server outlives the run: the cluster-wide group roles the migrations create are
      // dropped at the end if this run created them and no schema on the server still uses them.
      // So are the per-schema roles (016) this run's schemas left behind when a test dropped its
      // schema by other means than test/support/db.ts: those nothing depends on any more.
      const url = direct;
      stops.push(await startCatalogVacuum(url));
      const before = new Set(await existingRoles(url, GROUP_ROLES));
      const schemaRolesBefore = new Set(await schemaRoles(url));
      stops.push(async () => {
        const made = (await schemaRoles(url)).filter((role) => !schemaRolesBefore.has(role));
        await dropUnusedRoles(url, made);
        await dropUnusedRoles(
          url,
          GROUP_ROLES.filter((role) => !before.has(role)),
        );
      });
    }
    // Emptied schemas handed between tests (./schema-pool.ts); what is left of them at the end
    // is dropped with its roles, before the role sweep above (stops run last first).
    const runId = randomBytes(6).toString('hex');
    await createSchemaPool(direct);
    const poolUrl = direct;
    stops.push(async () => {
      for (const schema of await takeAllPooled(poolUrl, runId)) await dropSchemaAndRoles(poolUrl, schema);
    });
    let url = direct;
    const pooled = process.env.LEASEHOLD_TEST_PGBOUNCER === '1';
    if (pooled) {
      const bouncer = await startPgBouncer(direct, (await maxConnections(direct)) - DIRECT_CONNECTIONS);
      stops.push(() => bouncer.stop());
      url = bouncer.connectionString;
    }
    project.provide('databaseUrl', url);
    project.provide('directDatabaseUrl', direct);
    project.provide('pooled', pooled);
    project.provide('runId', runId);
    return teardown;
  } catch (err) {
    await teardown();
    throw err;
  }
}

async function maxConnections(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ max_connections: string }>('SHOW max_connections');
    return Number(rows[0]?.max_connections);
  } finally {
    await client.end();
  }
}
