// What `npm run test:system` needs from the system, checked before Vitest starts: without it, the
// run says what to install in one line and exits 1 (Vitest's own report of a failed global setup
// printed "No test files found" and a stack trace first). test/system/global-setup.ts runs this
// same script, so a direct `vitest --config vitest.system.config.ts` refuses the same way.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const PGBOUNCER_PATHS = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'];

/** The first missing requirement, as a sentence saying what to do; null when nothing is missing. */
async function missingRequirement() {
  if (!PGBOUNCER_PATHS.some((path) => existsSync(path))) {
    return (
      `PgBouncer is not installed (looked for ${PGBOUNCER_PATHS.join(' and ')}): the system suite needs it. ` +
      'Install it with `apt-get install -y pgbouncer` (Debian/Ubuntu), or run `npm test`, which needs no system package.'
    );
  }
  // The SQL API's clients (test/system/sql-api-clients.test.ts): psql, and Python's psycopg 3 for
  // the system's own Python (where Debian's package installs it).
  if (spawnSync('psql', ['--version']).error) {
    return 'the system suite needs psql: apt-get install -y postgresql-client';
  }
  if (spawnSync('/usr/bin/python3', ['-c', 'import psycopg']).status !== 0) {
    return 'the system suite needs psycopg 3 for /usr/bin/python3: apt-get install -y python3-psycopg';
  }
  // The many-hosts harness's network test builds namespaces, veth pairs and nft rules.
  if (process.getuid?.() !== 0) return 'the system suite needs root (network namespaces)';
  for (const [binary, pkg] of [
    ['ip', 'iproute2'],
    ['nft', 'nftables'],
  ]) {
    if (spawnSync(binary, ['--version']).error)
      return `the system suite needs ${binary}: apt-get install -y ${pkg}`;
  }
  // The high-availability rig (test/system/ha-failover.test.ts) installs its managers' Debian
  // packages itself; where it cannot, the suite refuses here, naming them.
  const { ensurePackages } = await import('../chaos/ha/ha-packages.mjs');
  for (const manager of ['patroni', 'pg_auto_failover']) {
    const cannot = ensurePackages(manager);
    if (cannot !== null) return cannot;
  }
  return null;
}

const missing = await missingRequirement();
if (missing !== null) {
  process.stderr.write(`test:system: ${missing}\n`);
  process.exit(1);
}
