import type { Queryable } from '../storage/db.js';
import { quoteIdent } from '../storage/db.js';
import { schemaFunctions } from '../storage/functions.js';

/**
 * The names of this version's SECURITY DEFINER functions (storage/functions.ts) that `schema` lacks:
 * one catalog read. Empty once migrate() installed them; a library upgrade that changed a
 * statement finds its new function missing, even though no migration is pending.
 */
export async function missingFunctions(db: Queryable, schema: string): Promise<string[]> {
  const names = schemaFunctions(schema).map((fn) => fn.name);
  const { rows } = await db.query<{ proname: string }>({
    text: `SELECT p.proname FROM pg_catalog.pg_proc AS p
           JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
           WHERE n.nspname = $1 AND p.proname = ANY ($2::text[])`,
    values: [schema, names],
  });
  const present = new Set(rows.map((row) => row.proname));
  return names.filter((name) => !present.has(name));
}

/**
 * Creates the functions `schema` lacks, inside the migration's transaction and lock, then grants
 * them (grant_function_roles() of migration 016: EXECUTE revoked from PUBLIC, granted to the role
 * each belongs to and to the admin roles). Returns how many it created. Functions of other library
 * versions are left alone: their processes may still be running (a rolling upgrade).
 */
export async function installFunctions(db: Queryable, schema: string): Promise<number> {
  const missing = new Set(await missingFunctions(db, schema));
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
  await db.query({ text: `SELECT ${quoteIdent(schema)}.grant_function_roles()` });
  return missing.size;
}
