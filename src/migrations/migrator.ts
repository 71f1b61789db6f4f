import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { SchemaVersionError, toDatabaseError } from '../errors.js';
import { guardCheckedOut } from '../storage/checkout.js';
import { quoteIdent } from '../storage/db.js';

/** One forward-only migration: a numbered SQL file. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

const MIGRATION_FILE = /^(\d{3})_([a-z0-9_]+)\.sql$/;
// Arbitrary but fixed first key of the two-key advisory lock; the second is derived from the schema.
const ADVISORY_LOCK_CLASS = 0x4c48;

let cached: Migration[] | undefined;

/** The migrations shipped with this version, in order. */
export function loadMigrations(): Migration[] {
  if (cached) return cached;
  const dir = fileURLToPath(new URL('./sql/', import.meta.url));
  cached = readdirSync(dir)
    .map((file) => ({ file, match: MIGRATION_FILE.exec(file) }))
    .filter((entry): entry is { file: string; match: RegExpExecArray } => entry.match !== null)
    .map(({ file, match }) => ({
      version: Number(match[1]),
      name: match[2] ?? file,
      sql: readFileSync(new URL(`./sql/${file}`, import.meta.url), 'utf8'),
    }))
    .sort((a, b) => a.version - b.version);
  return cached;
}

/** What `migrate()` did. */
export interface MigrateResult {
  /** Versions applied by this call (empty when the schema was already current). */
  applied: number[];
  /** The schema's version afterwards. */
  version: number;
}

/**
 * Brings `schema` up to the latest migration in one transaction. Many processes may call it at
 * once: an advisory lock serialises them, and the later ones find nothing left to do.
 * Refuses (SchemaVersionError) to touch a schema migrated by a newer Leasehold.
 */
export async function migrate(pool: pg.Pool, schema: string): Promise<MigrateResult> {
  const migrations = loadMigrations();
  const latest = migrations.at(-1)?.version ?? 0;
  const s = quoteIdent(schema);
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw toDatabaseError(err, 'migrate');
  }
  const unguard = guardCheckedOut(client);
  try {
    await client.query('BEGIN');
    // Taken before CREATE SCHEMA: concurrent "IF NOT EXISTS" creations can otherwise collide.
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [ADVISORY_LOCK_CLASS, schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(`SET LOCAL search_path TO ${s}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${s}.migrations (
         version integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const { rows } = await client.query<{ version: number }>(
      `SELECT coalesce(max(version), 0) AS version FROM ${s}.migrations`,
    );
    const current = rows[0]?.version ?? 0;
    if (current > latest) {
      throw new SchemaVersionError(
        `schema ${schema} is at version ${current}, newer than this Leasehold (${latest}); upgrade Leasehold`,
      );
    }
    const applied: number[] = [];
    for (const migration of migrations) {
      if (migration.version <= current) continue;
      await client.query(migration.sql);
      await client.query(`INSERT INTO ${s}.migrations (version, name) VALUES ($1, $2)`, [
        migration.version,
        migration.name,
      ]);
      applied.push(migration.version);
    }
    await client.query('COMMIT');
    return { applied, version: Math.max(current, latest) };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    if (err instanceof SchemaVersionError) throw err;
    throw toDatabaseError(err, 'migrate');
  } finally {
    unguard();
    client.release();
  }
}

/** The version a schema is at (0 when it has never been migrated). */
export async function schemaVersion(pool: pg.Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ version: number | null }>(
    `SELECT CASE WHEN to_regclass($1) IS NULL THEN 0 END AS version`,
    [`${quoteIdent(schema)}.migrations`],
  );
  if (rows[0]?.version === 0) return 0;
  const result = await pool.query<{ version: number }>(
    `SELECT coalesce(max(version), 0) AS version FROM ${quoteIdent(schema)}.migrations`,
  );
  return result.rows[0]?.version ?? 0;
}
