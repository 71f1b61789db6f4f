// What `npm run chaos:ha` needs from the system, per manager, and how it gets it: the Debian
// packages, installed with apt-get when missing (the rig runs as root). One place, read by the
// rig (chaos/ha.mjs) and by the system suite's requirement check (scripts/require-system-packages.mjs).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Files that prove a package is installed -> the package. */
const COMMON = [
  ['/usr/lib/postgresql/15/bin/pg_ctl', 'postgresql-15'],
  ['/usr/lib/postgresql/15/bin/pg_rewind', 'postgresql-15'],
  ['/usr/lib/postgresql/15/bin/psql', 'postgresql-client-15'],
  ['/usr/sbin/nft', 'nftables'],
  ['/usr/sbin/ip', 'iproute2'],
];
export const HA_REQUIREMENTS = {
  patroni: [...COMMON, ['/usr/bin/patroni', 'patroni'], ['/usr/bin/etcd', 'etcd-server']],
  pg_auto_failover: [
    ...COMMON,
    ['/usr/bin/pg_autoctl', 'pg-auto-failover-cli'],
    ['/usr/lib/postgresql/15/lib/pgautofailover.so', 'postgresql-15-auto-failover'],
  ],
};

/** The packages of `manager` that are missing (by the files they install). */
export function missingPackages(manager) {
  const missing = HA_REQUIREMENTS[manager].filter(([file]) => !existsSync(file)).map(([, pkg]) => pkg);
  return [...new Set(missing)];
}

/**
 * Installs what `manager` lacks with apt-get; returns null when everything is there afterwards, or
 * one sentence saying what is missing and why it could not be installed.
 */
export function ensurePackages(manager, log = () => {}) {
  let missing = missingPackages(manager);
  if (missing.length === 0) return null;
  log(`installing ${missing.join(' ')} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let result = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...missing], {
    encoding: 'utf8',
    env,
    timeout: 600_000,
  });
  if (result.status !== 0) {
    spawnSync('apt-get', ['update'], { encoding: 'utf8', env, timeout: 600_000 });
    result = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...missing], {
      encoding: 'utf8',
      env,
      timeout: 600_000,
    });
  }
  missing = missingPackages(manager);
  if (missing.length === 0) return null;
  const reason =
    (result.error?.message ?? result.stderr ?? '').trim().split('\n').at(-1) || `exit ${result.status}`;
  return `the ${manager} rig needs ${missing.join(', ')} and apt-get could not install them (${reason}); install them with: apt-get install -y ${missing.join(' ')}`;
}
