import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll } from 'vitest';
import { Leasehold, type LeaseholdOptions } from '../../src/index.js';
import { directDatabaseUrl } from './db.js';
import { withClient } from './schema-pool.js';

/**
 * A group role to grant a test login: a schema's own (`schemaRole`), or one of 006's cluster-wide
 * roles, which migration 016 empties on every schema but the default one (admin excepted).
 */
export type GroupRole = string;

/** What a schema's roles are called (migration 016): `<schema>_producer` and so on. */
export type SchemaRoleKind = 'producer' | 'worker' | 'admin';

/** The name of `schema`'s `kind` role. */
export function schemaRole(schema: string, kind: SchemaRoleKind): string {
  return `${schema}_${kind}`;
}

/** A login role made for one test file. */
export interface Login {
  name: string;
  /** The test server's connection string, as this login. */
  url: string;
}

const logins: string[] = [];
const clients: Leasehold[] = [];

/** Runs `use` on a superuser connection to the test server. */
export async function asSuperuser<T>(
  use: (client: pg.Client) => Promise<T>,
  url = directDatabaseUrl(),
): Promise<T> {
  return withClient(url, use);
}

/** A connection string for `name` with `password`, on the server `url` names. */
export function urlFor(url: string, name: string, password: string): string {
  const parsed = new URL(url);
  parsed.username = name;
  parsed.password = password;
  return parsed.toString();
}

/**
 * Creates a login role with a unique name, granted `groups` (and, with `createSchemas`, the right to
 * create schemas in the test database: a schema owner that is not a superuser). Dropped after the
 * file with what it owns; the group roles are never dropped, since other files' schemas use them.
 */
export async function createLogin(groups: GroupRole[], { createSchemas = false } = {}): Promise<Login> {
  const name = `lh_login_${randomBytes(5).toString('hex')}`;
  const password = randomBytes(16).toString('hex');
  await asSuperuser(async (client) => {
    // Names and password are hex drawn here: nothing from outside reaches this SQL.
    await client.query(`CREATE ROLE ${name} LOGIN PASSWORD '${password}'`);
    for (const group of groups) await client.query(`GRANT "${group}" TO ${name}`);
    if (createSchemas)
      await client.query(`GRANT CREATE ON DATABASE "${await currentDatabase(client)}" TO ${name}`);
  });
  logins.push(name);
  // Direct, not through a test pooler: roles are the server's, and a pooler's own authentication
  // (its userlist) is outside what these tests are about.
  return { name, url: urlFor(directDatabaseUrl(), name, password) };
}

/**
 * A Leasehold client on `schema`, connected as a new login granted `groups`; closed after the file.
 * Pass `viaFunctions: true` for a producer or worker role (see `roleClient`).
 */
export async function clientAs(
  groups: GroupRole[],
  schema: string,
  options: Omit<LeaseholdOptions, 'schema' | 'connectionString' | 'pool'> = {},
): Promise<Leasehold> {
  const login = await createLogin(groups);
  // The login connects to the server directly (see createLogin): a session of its own, so it may
  // prepare statements and LISTEN whatever LEASEHOLD_POOLER says about the suite's pooled URL.
  const direct = { listen: true, preparedStatements: true };
  return track(new Leasehold({ poolSize: 4, ...direct, ...options, connectionString: login.url, schema }));
}

/**
 * A client connected as a new login granted `schema`'s `kind` role, as an operator would run it:
 * the producer and worker go through the schema's functions.
 */
export function roleClient(
  schema: string,
  kind: SchemaRoleKind,
  options: Omit<LeaseholdOptions, 'schema' | 'connectionString' | 'pool'> = {},
): Promise<Leasehold> {
  return clientAs([schemaRole(schema, kind)], schema, { viaFunctions: kind !== 'admin', ...options });
}

/** Closes `lh` after the file, before its login role is dropped. */
export function track(lh: Leasehold): Leasehold {
  clients.push(lh);
  return lh;
}

async function currentDatabase(client: pg.Client): Promise<string> {
  const { rows } = await client.query<{ db: string }>('SELECT current_database() AS db');
  return rows[0]?.db ?? 'postgres';
}

afterAll(async () => {
  await Promise.all(clients.splice(0).map((lh) => lh.close()));
  const names = logins.splice(0);
  if (names.length === 0) return;
  await asSuperuser(async (client) => {
    for (const name of names) {
      // Only what this login owns (a schema it migrated) and the privileges granted to it.
      await client.query(`DROP OWNED BY ${name} CASCADE`);
      await client.query(`DROP ROLE ${name}`);
    }
  });
});
