import pg from 'pg';

/**
 * Migrated schemas handed from one test to the next within a run.
 *
 * Most tests want "a freshly migrated schema of my own" and nothing more. Migrating one costs
 * about a hundred DDL statements (tables, indexes, roles, grants, SECURITY DEFINER functions):
 * 0.2 s on an idle server, 0.4 s under the suite's load, a quarter of the suite's test time over
 * some 450 calls; on PostgreSQL 15 each CREATE INDEX also waits for an fsync of its own. A schema
 * a test file is done with is instead emptied (its rows deleted, its sequences restarted) and
 * handed to the next test that asks, but only when its definition is still exactly what the
 * migrations made: a fingerprint of its catalog (columns, constraints, indexes, functions, grants,
 * role memberships, settings) taken when it was migrated must match. A test that altered its
 * schema (dropped a constraint, made a table, granted a role) leaves it to be dropped as before.
 * Emptied, a schema is what migrate() made: no rows but the migrations' own, sequences at their
 * start. A test that reads the tables' cumulative statistics asks for a schema by name instead.
 *
 * The free list is a table on the server (`lh_test_pool.free`), keyed by the run, so that the
 * workers of one run share it and a run on a shared server never takes another run's schemas.
 */

const POOL = 'lh_test_pool';

/** Creates the free list (idempotent); global-setup.ts calls it once per run. */
export async function createSchemaPool(url: string): Promise<void> {
  await withClient(url, async (client) => {
    // Two runs on one server may both create it: the loser's duplicate is no error to report.
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${POOL}`).catch(ignoreDuplicate);
    await client
      .query(
        `CREATE TABLE IF NOT EXISTS ${POOL}.free (
           schema text PRIMARY KEY,
           run text NOT NULL,
           fingerprint text NOT NULL
         )`,
      )
      .catch(ignoreDuplicate);
  });
}

/** The schemas of `run` still in the free list, removed from it (for the run's teardown). */
export async function takeAllPooled(url: string, run: string): Promise<string[]> {
  return withClient(url, async (client) => {
    const { rows } = await client.query<{ schema: string }>(
      `DELETE FROM ${POOL}.free WHERE run = $1 RETURNING schema`,
      [run],
    );
    return rows.map((row) => row.schema);
  });
}

/** A free schema of `run` with its fingerprint, taken off the list; null when none is free. */
export async function checkOutSchema(
  client: pg.Client,
  run: string,
): Promise<{ schema: string; fingerprint: string } | null> {
  const { rows } = await client.query<{ schema: string; fingerprint: string }>(
    `DELETE FROM ${POOL}.free
     WHERE schema = (SELECT schema FROM ${POOL}.free WHERE run = $1 LIMIT 1 FOR UPDATE SKIP LOCKED)
     RETURNING schema, fingerprint`,
    [run],
  );
  return rows[0] ?? null;
}

/** The fingerprint of `schema`'s definition, to compare after a test used it. */
export async function schemaFingerprint(client: pg.Client, schema: string): Promise<string | null> {
  return fingerprintOf(client, schema);
}

/**
 * Empties `schema` and puts it back on the free list when its definition still matches
 * `fingerprint`. Returns false (nothing changed) when it does not, when it is gone, or when its
 * tables could not be locked at once (a connection the test left open still uses them): the
 * caller then drops it.
 *
 * Emptied with DELETE and VACUUM, not TRUNCATE: TRUNCATE gives every table and index a new file,
 * and on PostgreSQL 15 building each empty index ends with an fsync of its own, some sixty per
 * schema (a migrate pays them too, in CREATE INDEX): on a disk that syncs slowly that made a
 * check-in as costly as the migrate it saves. A test leaves few rows; deleting them, then vacuuming
 * the tables that had some, leaves tables as empty, with no dead tuples in their statistics.
 */
export async function checkInSchema(
  client: pg.Client,
  run: string,
  schema: string,
  fingerprint: string,
): Promise<boolean> {
  if ((await fingerprintOf(client, schema)) !== fingerprint) return false;
  const { rows: tables } = await client.query<{ name: string }>(
    `SELECT format('%I.%I', n.nspname, c.relname) AS name
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname <> 'migrations'
     ORDER BY c.relname`,
    [schema],
  );
  let emptied: string[];
  try {
    await client.query('BEGIN');
    await client.query("SET LOCAL lock_timeout = '2s'");
    // Every row goes, so no foreign key is left dangling: their checks (triggers) can be skipped,
    // and the tables emptied in any order, in one statement.
    await client.query('SET LOCAL session_replication_role = replica');
    const deletes = tables.map((table, i) => `d${i} AS (DELETE FROM ${table.name} RETURNING 1)`);
    const counts = tables.map((_, i) => `(SELECT count(*) FROM d${i})::int AS c${i}`);
    const { rows } = await client.query<Record<string, number>>(
      `WITH ${deletes.join(', ')} SELECT ${counts.join(', ')}`,
    );
    emptied = tables.filter((_, i) => (rows[0]?.[`c${i}`] ?? 0) > 0).map((table) => table.name);
    await client.query(
      `SELECT setval(format('%I.%I', schemaname, sequencename), start_value, false)
       FROM pg_sequences WHERE schemaname = $1`,
      [schema],
    );
    await client.query('COMMIT');
  } catch {
    await client.query('ROLLBACK').catch(() => {});
    return false;
  }
  try {
    await client.query("SET lock_timeout = '2s'");
    if (emptied.length > 0) await client.query(`VACUUM ${emptied.join(', ')}`);
  } catch {
    return false;
  }
  await client.query(`INSERT INTO ${POOL}.free (schema, run, fingerprint) VALUES ($1, $2, $3)`, [
    schema,
    run,
    fingerprint,
  ]);
  return true;
}

/**
 * Drops a schema and everything in it, and the roles migration 016 made for it (roles are the
 * server's: on a shared one they would outlive the schema). The default schema's roles carry 006's
 * cluster-wide names, which global-setup.ts cleans up instead.
 */
export async function dropSchemaAndRoles(url: string, schema: string): Promise<void> {
  await withClient(url, async (client) => {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    if (schema === 'leasehold') return;
    for (const kind of ['producer', 'worker', 'admin']) {
      // Refused (2BP01) only while something else still depends on it: then global-setup's sweep.
      await client.query(`DROP ROLE IF EXISTS "${schema}_${kind}"`).catch((err: { code?: string }) => {
        if (err.code !== '2BP01') throw err;
      });
    }
  });
}

// Everything migrate() defines in a schema, with the schema's name (and its roles' prefix) taken
// out so that two schemas migrated alike compare equal. Sizes, row counts, relfilenodes and
// statistics are left out: TRUNCATE changes them and a fresh schema has its own.
const FINGERPRINT = `
WITH s AS (SELECT oid, nspname FROM pg_namespace WHERE nspname = $1),
roles AS (SELECT r.oid, r.rolname FROM pg_roles r, s WHERE r.rolname LIKE s.nspname || '\\_%'),
parts AS (
  SELECT 'schema' AS kind, concat_ws('|', pg_get_userbyid(n.nspowner), n.nspacl::text) AS item
  FROM pg_namespace n JOIN s ON s.oid = n.oid
  UNION ALL
  SELECT 'rel', concat_ws('|', c.relname, c.relkind, c.relpersistence, c.relrowsecurity,
    c.relreplident, c.reloptions::text, c.relacl::text, pg_get_userbyid(c.relowner))
  FROM pg_class c JOIN s ON s.oid = c.relnamespace
  UNION ALL
  SELECT 'col', concat_ws('|', c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
    a.attnotnull, a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid), a.attacl::text)
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN s ON s.oid = c.relnamespace
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'con', concat_ws('|', c.relname, k.conname, pg_get_constraintdef(k.oid))
  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN s ON s.oid = c.relnamespace
  UNION ALL
  SELECT 'idx', pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN s ON s.oid = c.relnamespace
  UNION ALL
  SELECT 'trg', concat_ws('|', c.relname, t.tgname, t.tgenabled, pg_get_triggerdef(t.oid))
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN s ON s.oid = c.relnamespace
  WHERE NOT t.tgisinternal
  UNION ALL
  SELECT 'pol', concat_ws('|', c.relname, p.polname, p.polcmd, p.polroles::text,
    pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
  FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN s ON s.oid = c.relnamespace
  UNION ALL
  SELECT 'seq', concat_ws('|', c.relname, q.seqtypid, q.seqstart, q.seqincrement, q.seqmax, q.seqmin,
    q.seqcache, q.seqcycle)
  FROM pg_sequence q JOIN pg_class c ON c.oid = q.seqrelid JOIN s ON s.oid = c.relnamespace
  UNION ALL
  SELECT 'fn', concat_ws('|', p.proname, pg_get_function_identity_arguments(p.oid), md5(p.prosrc),
    p.prosecdef, p.provolatile, p.proconfig::text, p.proacl::text, pg_get_userbyid(p.proowner))
  FROM pg_proc p JOIN s ON s.oid = p.pronamespace
  UNION ALL
  SELECT 'type', concat_ws('|', t.typname, t.typtype, (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
    FROM pg_enum e WHERE e.enumtypid = t.oid))
  FROM pg_type t JOIN s ON s.oid = t.typnamespace WHERE t.typtype IN ('e', 'd', 'c') AND t.typrelid = 0
  UNION ALL
  SELECT 'defacl', concat_ws('|', d.defaclobjtype, d.defaclacl::text)
  FROM pg_default_acl d JOIN s ON s.oid = d.defaclnamespace
  UNION ALL
  SELECT 'role', concat_ws('|', r.rolname, r.rolcanlogin, r.rolsuper, r.rolinherit, r.rolconfig::text)
  FROM pg_roles r JOIN roles USING (oid)
  UNION ALL
  SELECT 'member', concat_ws('|', g.rolname, pg_get_userbyid(m.member), m.admin_option)
  FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
  WHERE m.roleid IN (SELECT oid FROM roles) OR m.member IN (SELECT oid FROM roles)
)
SELECT md5(replace(string_agg(kind || ':' || coalesce(item, ''), E'\\n' ORDER BY kind, item), s.nspname, '<schema>'))
  AS fingerprint
FROM parts, s
GROUP BY s.nspname`;

async function fingerprintOf(client: pg.Client, schema: string): Promise<string | null> {
  const { rows } = await client.query<{ fingerprint: string }>(FINGERPRINT, [schema]);
  return rows[0]?.fingerprint ?? null;
}

/** Runs `use` on a connection of its own to `url`, ended afterwards. */
export async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

// duplicate_schema, duplicate_table, unique_violation (a catalog row raced by another run).
function ignoreDuplicate(err: { code?: string }): void {
  if (!['42P06', '42P07', '23505'].includes(err.code ?? '')) throw err;
}
