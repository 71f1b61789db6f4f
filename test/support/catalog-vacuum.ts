import pg from 'pg';

// The catalogs a test's schema writes rows into: creating and dropping a schema of tables, indexes,
// functions and roles leaves dead rows in each.
const CATALOGS = [
  'pg_attribute',
  'pg_class',
  'pg_depend',
  'pg_proc',
  'pg_constraint',
  'pg_type',
  'pg_index',
  'pg_attrdef',
  'pg_namespace',
  'pg_trigger',
  'pg_sequence',
  'pg_statistic',
  'pg_init_privs',
  'pg_description',
  'pg_shdepend',
  'pg_auth_members',
  'pg_authid',
].map((name) => `pg_catalog.${name}`);

const INTERVAL_MS = 20_000;

/**
 * On a server that runs without autovacuum (as this machine's system PostgreSQL does), vacuums the
 * system catalogs now and every 20 s until the returned stop is called. Each schema a test makes
 * and drops leaves thousands of dead catalog rows; unvacuumed, a whole run left pg_attribute at
 * 480,000 dead rows and every catalog lookup slow: the operations tests took 106 s against 49 s
 * once vacuumed. Where autovacuum runs, or the user may not vacuum the catalogs, it does nothing.
 */
export async function startCatalogVacuum(url: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: url, application_name: 'leasehold-tests-catalog-vacuum' });
  await client.connect();
  const { rows } = await client.query<{ autovacuum: string }>('SHOW autovacuum');
  const vacuum = () => client.query(`VACUUM ${CATALOGS.join(', ')}`).then(() => true);
  const mayVacuum = rows[0]?.autovacuum === 'off' && (await vacuum().catch(() => false));
  if (!mayVacuum) {
    await client.end();
    return async () => {};
  }
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(vacuum).catch(() => {});
  }, INTERVAL_MS);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
    await client.end();
  };
}
