import pg from 'pg';

/** The cluster-wide group roles migration 006 creates on the server the tests use. */
export const GROUP_ROLES = ['leasehold_producer', 'leasehold_worker', 'leasehold_admin'];

// SQLSTATE of DROP ROLE refused because objects or privileges in some database depend on the role.
const DEPENDENT_OBJECTS = '2BP01';

/**
 * The per-schema group roles (migration 016: `<schema>_producer`, `_worker`, `_admin`, NOLOGIN)
 * on the server at `url`, 006's cluster-wide names aside.
 */
export async function schemaRoles(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ rolname: string }>(
      `SELECT rolname FROM pg_roles
       WHERE NOT rolcanlogin AND rolname ~ '_(producer|worker|admin)$' AND rolname <> ALL ($1)
       ORDER BY rolname`,
      [GROUP_ROLES],
    );
    return rows.map((row) => row.rolname);
  } finally {
    await client.end();
  }
}

/** Which of `names` exist as roles on the server at `url`. */
export async function existingRoles(url: string, names: readonly string[]): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ rolname: string }>(
      'SELECT rolname FROM pg_roles WHERE rolname = ANY($1) ORDER BY rolname',
      [names],
    );
    return rows.map((row) => row.rolname);
  } finally {
    await client.end();
  }
}

/**
 * Drops each of `names` that no database object or privilege depends on any more: what a test run
 * created on a shared server and its schemas (dropped with the files) no longer use. A role still
 * in use (another run's schema, an operator's grants) is refused by PostgreSQL and left alone.
 * Returns the roles dropped.
 */
export async function dropUnusedRoles(url: string, names: readonly string[]): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const dropped: string[] = [];
  try {
    for (const name of await existingRoles(url, names)) {
      try {
        await client.query(`DROP ROLE "${name.replace(/"/g, '""')}"`);
        dropped.push(name);
      } catch (err) {
        if ((err as { code?: string }).code !== DEPENDENT_OBJECTS) throw err;
      }
    }
  } finally {
    await client.end();
  }
  return dropped;
}
