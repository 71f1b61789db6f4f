import type { Queryable } from '../storage/db.js';
import { quoteIdent } from '../storage/db.js';
import { schemaFunctions } from '../storage/roles/functions.js';
import { SQL_API_NAMES, SQL_API_VERSION, sqlApi } from '../storage/roles/sql-api.js';

/**
 * The names of this version's SECURITY DEFINER functions (storage/roles/functions.ts) that `schema` lacks,
 * and, on a schema at `version` 23 or later, the stable SQL API functions (storage/roles/sql-api.ts) not
 * written by this version: one catalog read. Empty once migrate() installed them; a library
 * upgrade that changed a statement finds its new function missing (and the SQL API's bodies
 * stale), even though no migration is pending.
 */
export async function missingFunctions(db: Queryable, schema: string, version: number): Promise<string[]> {
  const names = schemaFunctions(schema).map((fn) => fn.name);
  const api = version >= SQL_API_VERSION ? [...SQL_API_NAMES] : [];
  const { rows } = await db.query<{ proname: string }>({
    text: `SELECT p.proname FROM pg_catalog.pg_proc AS p
           JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
           WHERE n.nspname = $1 AND (p.proname = ANY ($2::text[])
             OR (p.proname = ANY ($3::text[]) AND pg_catalog.obj_description(p.oid, 'pg_proc') = $4))`,
    values: [schema, names, api, sqlApi(schema).comment],
  });
  const present = new Set(rows.map((row) => row.proname));
  return [...names, ...api].filter((name) => !present.has(name));
}

/**
 * Creates the functions `schema` lacks (and the SQL API of this version, CREATE OR REPLACE: same
 * names, signatures and grants), inside the migration's transaction and lock, then grants
 * them (grant_function_roles() of migration 016: EXECUTE revoked from PUBLIC, granted to the role
 * each belongs to and to the admin roles). Returns how many it created. Functions of other library
 * versions are left alone: their processes may still be running (a rolling upgrade).
 */
export async function installFunctions(db: Queryable, schema: string, version: number): Promise<number> {
  const missing = new Set(await missingFunctions(db, schema, version));
  if (missing.size === 0) return 0;
  // Not validated at creation (as pg_dump restores functions): a fresh schema migrates in this one
  // transaction, and before PostgreSQL 17 a body naming an enum value added in it ('cancelled', 002)
  // fails to parse here ("unsafe use of new value"), though it runs in any later transaction.
  // test/storage/definer-functions.test.ts checks every body against the server instead.
  await db.query({ text: `SELECT pg_catalog.set_config('check_function_bodies', 'off', true)` });
  for (const fn of schemaFunctions(schema)) {
    if (!missing.has(fn.name)) continue;
    for (const statement of fn.create) await db.query({ text: statement });
  }
  // The SQL API's bodies call the functions above: written after them, all three at once.
  if (SQL_API_NAMES.some((name) => missing.has(name))) {
    for (const statement of sqlApi(schema).create) await db.query({ text: statement });
  }
  await db.query({ text: `SELECT ${quoteIdent(schema)}.grant_function_roles()` });
  return missing.size;
}
