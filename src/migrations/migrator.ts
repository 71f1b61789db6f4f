import { readdirSync, readFileSync } from 'node:fs';
import type pg from 'pg';
import { SchemaVersionError, toDatabaseError } from '../shared/errors.js';
import { packageFilePath, packageFileUrl } from '../shared/package-files.js';
import { guardCheckedOut, quoteIdent } from '../storage/db.js';
import { installFunctions, missingFunctions } from './functions.js';

/** One forward-only migration: a numbered SQL file. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

const MIGRATION_FILE = /^(\d{3})_([a-z0-9_]+)\.sql$/;
// The SQL files sit ten to a folder by number (`sql/001-010/`, `sql/011-020/`, ...), so that no
// folder of src/ grows past the width docs/architecture.md allows; the folders are read in full and
// the files ordered by number, so the grouping never changes what runs or in what order.
const RANGE_FOLDER = /^(\d{3})-(\d{3})$/;
// Arbitrary but fixed first key of the two-key advisory lock; the second is derived from the schema.
const ADVISORY_LOCK_CLASS = 0x4c48;

let cached: Migration[] | undefined;

/**
 * The migrations shipped with this version, in order. A migration file outside its number's range
 * folder (say a new 028 put directly in sql/) fails every call, so it can never be skipped unseen.
 */
export function loadMigrations(): Migration[] {
  if (cached) return cached;
  const found: Migration[] = [];
  for (const entry of readdirSync(packageFilePath('migrations/sql/'), { withFileTypes: true })) {
    const range = RANGE_FOLDER.exec(entry.name);
    if (!entry.isDirectory() || !range) {
      if (entry.name.endsWith('.sql')) throw misplacedMigration(entry.name, 'sql/');
      continue;
    }
    const [low, high] = [Number(range[1]), Number(range[2])];
    for (const file of readdirSync(packageFilePath(`migrations/sql/${entry.name}/`))) {
      const match = MIGRATION_FILE.exec(file);
      if (!match) continue;
      const version = Number(match[1]);
      if (version < low || version > high) throw misplacedMigration(file, `sql/${entry.name}/`);
      found.push({
        version,
        name: match[2] ?? file,
        sql: readFileSync(packageFileUrl(`migrations/sql/${entry.name}/${file}`), 'utf8'),
      });
    }
  }
  cached = found.sort((a, b) => a.version - b.version);
  return cached;
}

/** A packaging mistake in this repository, not a user's: named so the fix is obvious. */
function misplacedMigration(file: string, folder: string): Error {
  const version = Number(MIGRATION_FILE.exec(file)?.[1] ?? Number.NaN);
  const low = Math.floor((version - 1) / 10) * 10 + 1;
  const home = Number.isFinite(version)
    ? `sql/${String(low).padStart(3, '0')}-${String(low + 9).padStart(3, '0')}/`
    : 'a sql/NNN-NNN/ folder, named NNN_name.sql';
  return new Error(`migration file ${file} is in ${folder}; it belongs in ${home}`);
}

/** What `migrate()` did. */
export interface MigrateResult {
  /** Versions applied by this call (empty when the schema was already current). */
  applied: number[];
  /** The schema's version afterwards. */
  version: number;
  /**
   * What the migrations reported, e.g. that the group roles could not be created because the
   * migrating user may not create roles (see docs/operators-guide.md, "Database roles").
   */
  notices: string[];
}

/**
 * Brings `schema` up to the latest migration in one transaction, and installs this version's
 * SECURITY DEFINER functions (storage/roles/functions.ts) where they are missing, even on a schema whose
 * version is current (a library upgrade may change a statement without a migration). Many
 * processes may call it at once: an advisory lock serialises them, and the later ones find nothing
 * left to do. A schema already at the latest version with its functions is only read, so a role
 * that may not change the schema (the producer, worker and admin roles) can call it on start-up as
 * the schema's owner does.
 * Refuses (SchemaVersionError) to touch a schema migrated by a newer Leasehold.
 * `upTo` stops at an earlier version: for tests of a migration that runs with work in flight,
 * which start from the schema an older Leasehold left.
 */
export async function migrate(
  pool: pg.Pool,
  schema: string,
  options: { upTo?: number } = {},
): Promise<MigrateResult> {
  const migrations = loadMigrations().filter((m) => options.upTo === undefined || m.version <= options.upTo);
  const latest = migrations.at(-1)?.version ?? 0;
  let current: number;
  try {
    current = await schemaVersion(pool, schema);
  } catch (err) {
    throw toDatabaseError(err, 'migrate');
  }
  if (current > latest) throw newerSchema(schema, current, latest);
  if (current === latest) {
    let missing: string[];
    try {
      missing = await missingFunctions(pool, schema, current);
    } catch (err) {
      throw toDatabaseError(err, 'migrate');
    }
    if (missing.length === 0) return { applied: [], version: current, notices: [] };
  }
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw toDatabaseError(err, 'migrate');
  }
  const unguard = guardCheckedOut(client);
  // Migrations speak to the operator through NOTICEs prefixed "leasehold:" (006: roles skipped).
  const notices: string[] = [];
  const onNotice = (notice: { message?: string }) => {
    if (!notice.message?.startsWith('leasehold: ')) return;
    // Each later migration that adds tables runs grant_roles() again (017), which repeats its
    // notices about missing roles word for word: the operator needs each once.
    const message = notice.message.slice('leasehold: '.length);
    if (!notices.includes(message)) notices.push(message);
  };
  client.on('notice', onNotice);
  try {
    for (let attempt = 1; ; attempt++) {
      notices.length = 0; // a rolled-back attempt's notices do not count
      try {
        return await applyPending(client, schema, migrations, latest, notices);
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        if (err instanceof SchemaVersionError) throw err;
        if (attempt < MAX_ATTEMPTS && isCreationRace(err)) continue;
        throw toDatabaseError(err, 'migrate');
      }
    }
  } finally {
    client.off('notice', onNotice);
    unguard();
    client.release();
  }
}

/**
 * One migration transaction, serialised with other migrators by an advisory lock. Even so, a
 * migrator that waited for the lock can see its "CREATE SCHEMA IF NOT EXISTS" collide with the
 * schema the winner just committed (seen behind PgBouncer in most rounds of six concurrent
 * migrators, never on direct connections; the likeliest cause is a view of the catalog taken before
 * the winner committed). The caller rolls back and retries such a collision in a fresh transaction,
 * which finds the winner's work under the lock.
 */
async function applyPending(
  client: pg.PoolClient,
  schema: string,
  migrations: Migration[],
  latest: number,
  notices: string[],
): Promise<MigrateResult> {
  const s = quoteIdent(schema);
  await client.query('BEGIN');
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
  const locked = rows[0]?.version ?? 0;
  if (locked > latest) throw newerSchema(schema, locked, latest);
  const applied: number[] = [];
  for (const migration of migrations) {
    if (migration.version <= locked) continue;
    // A migration that redefines grant_roles() reports on the roles afresh (016: per-schema roles
    // replace 006's cluster-wide ones, whose notices would send the operator the wrong way).
    if (REDEFINES_GRANT_ROLES.test(migration.sql)) dropRoleNotices(notices);
    await client.query(migration.sql);
    await client.query(`INSERT INTO ${s}.migrations (version, name) VALUES ($1, $2)`, [
      migration.version,
      migration.name,
    ]);
    applied.push(migration.version);
  }
  const version = Math.max(locked, latest);
  await installFunctions(client, schema, version);
  await client.query('COMMIT');
  return { applied, version, notices };
}

const REDEFINES_GRANT_ROLES = /^CREATE OR REPLACE FUNCTION grant_roles\(\)/m;

function dropRoleNotices(notices: string[]): void {
  const kept = notices.filter((notice) => !notice.startsWith('role '));
  notices.splice(0, notices.length, ...kept);
}

// unique_violation, duplicate_schema, duplicate_table, duplicate_object: what "IF NOT EXISTS" can
// raise when another migrator created the object first. A genuine error with one of these codes
// fails the same way on every attempt, and is reported after the last.
const CREATION_RACE_CODES = new Set(['23505', '42P06', '42P07', '42710']);
const MAX_ATTEMPTS = 3;

function isCreationRace(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CREATION_RACE_CODES.has(code);
}

function newerSchema(schema: string, current: number, latest: number): SchemaVersionError {
  return new SchemaVersionError(
    `schema ${schema} is at version ${current}, newer than this Leasehold (${latest}); upgrade Leasehold`,
  );
}

/**
 * Reaches the database and refuses to go on with a schema a worker cannot run on: `DatabaseError`
 * (or `PermissionError`) when the server is refused, unreachable or refuses the login,
 * `SchemaVersionError` when the schema was never migrated or was migrated by a newer Leasehold.
 * An older but migrated schema is accepted: a rolling upgrade runs workers while migrating
 * (storage/roles/lane-routing.ts serves a schema from before 018).
 */
export async function assertSchemaUsable(pool: pg.Pool, schema: string, operation: string): Promise<void> {
  let current: number;
  try {
    current = await schemaVersion(pool, schema);
  } catch (err) {
    throw toDatabaseError(err, operation);
  }
  const latest = loadMigrations().at(-1)?.version ?? 0;
  if (current > latest) throw newerSchema(schema, current, latest);
  if (current === 0) {
    throw new SchemaVersionError(
      `schema ${schema} is not migrated (it holds no Leasehold tables): call lh.migrate() or run ` +
        `\`leasehold migrate --schema ${schema}\` first, or pass the schema your application uses`,
    );
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
