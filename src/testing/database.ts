import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Leasehold } from '../client.js';
import type { LeaseholdOptions } from '../context/client-options.js';
import type { EmbeddedPostgres } from '../embedded.js';
import { ValidationError } from '../shared/errors.js';
import { quoteIdent } from '../storage/db.js';
import { dropTestSchema } from '../storage/jobs/pending.js';

/** Options of `createTestLeasehold`: the client's options, less the schema and pool it makes. */
export interface TestLeaseholdOptions extends Omit<LeaseholdOptions, 'schema' | 'pool' | 'connectionString'> {
  /**
   * The server to use (default: `DATABASE_URL` when set, else an embedded PostgreSQL started for
   * this process and shared by its test clients).
   */
  connectionString?: string;
  /** Start of the fresh schema's name (default `lh_test`); a random suffix follows. */
  schemaPrefix?: string;
}

/** A migrated client on a fresh schema of its own, for one test file (or one test). */
export interface TestLeasehold {
  /** The client, migrated. */
  readonly lh: Leasehold;
  /** Its fresh schema. */
  readonly schema: string;
  /** The server it uses (embedded or given), for your own connections in the test. */
  readonly connectionString: string;
  /** True when this process started the embedded server for it. */
  readonly embedded: boolean;
  /**
   * Closes the client, drops its schema, and stops the embedded server once no other test client
   * of this process uses it. Stop your workers first. Safe to call more than once.
   */
  close(): Promise<void>;
}

// The embedded server of this process (one per test file under Vitest's and Jest's workers),
// started on first use and stopped when its last test client closes.
let shared: { server: Promise<EmbeddedPostgres>; users: number } | null = null;

async function useEmbeddedServer(): Promise<{ url: string; release: () => Promise<void> }> {
  if (!shared) {
    // Loaded only here: a test with DATABASE_URL never loads the embedded server's modules.
    const server = import('../embedded.js').then(({ startEmbeddedPostgres }) => startEmbeddedPostgres());
    shared = { server, users: 0 };
    server.catch(() => {
      shared = null;
    });
  }
  const current = shared;
  current.users++;
  let server: EmbeddedPostgres;
  try {
    server = await current.server;
  } catch (err) {
    current.users--;
    throw err;
  }
  return {
    url: server.connectionString,
    release: async () => {
      if (--current.users > 0) return;
      if (shared === current) shared = null;
      await server.stop();
    },
  };
}

const SCHEMA_PREFIX = /^[a-z_][a-z0-9_]{0,39}$/;

/**
 * Gives a test a migrated Leasehold on a fresh schema, on real PostgreSQL: the server named by
 * `connectionString` or `DATABASE_URL`, or else an embedded one started for this process (its
 * first start takes a few seconds). Call it in `beforeAll` and `close()` in `afterAll`.
 */
export async function createTestLeasehold(options: TestLeaseholdOptions = {}): Promise<TestLeasehold> {
  if (typeof options !== 'object' || options === null)
    throw new ValidationError('options', 'must be an object');
  const { connectionString: given, schemaPrefix = 'lh_test', ...clientOptions } = options;
  if (typeof schemaPrefix !== 'string' || !SCHEMA_PREFIX.test(schemaPrefix)) {
    throw new ValidationError(
      'schemaPrefix',
      'must be 1 to 40 lowercase letters, digits or _, not starting with a digit',
    );
  }
  const named = given ?? process.env.DATABASE_URL;
  const server = named ? { url: named, release: async () => {} } : await useEmbeddedServer();
  const schema = `${schemaPrefix}_${randomBytes(5).toString('hex')}`;
  let lh: Leasehold | undefined;
  try {
    lh = new Leasehold({ ...clientOptions, connectionString: server.url, schema });
    await lh.migrate();
  } catch (err) {
    await lh?.close();
    await dropSchema(server.url, schema).catch(() => {});
    await server.release();
    throw err;
  }
  const client = lh;
  let closing: Promise<void> | null = null;
  return {
    lh: client,
    schema,
    connectionString: server.url,
    embedded: !named,
    close() {
      closing ??= (async () => {
        await client.close();
        try {
          await dropSchema(server.url, schema);
        } finally {
          await server.release();
        }
      })();
      return closing;
    },
  };
}

async function dropSchema(url: string, schema: string): Promise<void> {
  const connection = new pg.Client({ connectionString: url });
  await connection.connect();
  try {
    await dropTestSchema(connection, quoteIdent(schema));
  } finally {
    await connection.end();
  }
}
