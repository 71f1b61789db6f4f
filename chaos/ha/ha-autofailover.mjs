// pg_auto_failover, as the high-availability rig (chaos/ha/ha-run.mjs) runs it: the monitor in the
// `dcs` machine, one `pg_autoctl` keeper per PostgreSQL node, Debian's PostgreSQL 15 binaries.
// Failover (the monitor's state machine), fencing (a primary that cannot reach the monitor or its
// standby demotes itself) and rejoin (pg_rewind, else a new base backup) are pg_auto_failover's own.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { addressOf, nsOf } from './ha-net.mjs';
import { PG_BIN, PG_PORT } from './ha-patroni.mjs';

const MONITOR_DB = 'pg_auto_failover';

/**
 * The settings that decide what a failover may lose (docs/operations.md, the pg_auto_failover
 * table). `sync`: number_sync_standbys 1 with every standby in the replication quorum (commits wait
 * for one of the two standbys, and only a node known to have every acknowledged commit is
 * promoted). `async`: number_sync_standbys 0 and `synchronous_commit = local` on every node: a
 * commit is acknowledged before any standby has it (taking every node out of the replication
 * quorum, the other way, was refused by the monitor in a trial and left for later). The monitor's
 * health checks are tightened so that a dead node is noticed in seconds, not its default 20 s.
 */
export function autoFailoverSettings(mode) {
  return {
    number_sync_standbys: mode === 'sync' ? 1 : 0,
    synchronous_commit: mode === 'sync' ? 'on' : 'local',
    monitor: {
      'pgautofailover.health_check_period': '1000',
      'pgautofailover.health_check_timeout': '1000',
      'pgautofailover.health_check_max_retries': '1',
      'pgautofailover.health_check_retry_delay': '500',
      'pgautofailover.node_considered_unhealthy_timeout': '5000',
      // A primary cut off from the monitor and its standbys stops accepting writes after this.
      'pgautofailover.primary_demote_timeout': '10000',
    },
  };
}

/** The pg_auto_failover manager: start, observe and restart its keepers. */
export function pgAutoFailover({ root, nodes, mode, user, log }) {
  const settings = autoFailoverSettings(mode);
  const logOf = (name) => join(root, `${name}.log`);
  const children = new Map();
  const dirOf = (name) => join(root, name);
  const monitorUrl = `postgres://autoctl_node@${addressOf('dcs')}:${PG_PORT}/${MONITOR_DB}?sslmode=disable`;

  const prepare = (name) => {
    const dir = dirOf(name);
    mkdirSync(join(dir, 'xdg-config'), { recursive: true });
    mkdirSync(join(dir, 'xdg-data'), { recursive: true });
    for (const d of [dir, join(dir, 'xdg-config'), join(dir, 'xdg-data')]) chownSync(d, user.uid, user.gid);
    return dir;
  };
  // pg_autoctl keeps its own state under XDG folders: one set per machine, as on real machines.
  const envArgs = (name) => [
    'env',
    `XDG_CONFIG_HOME=${join(dirOf(name), 'xdg-config')}`,
    `XDG_DATA_HOME=${join(dirOf(name), 'xdg-data')}`,
    `PG_CONFIG=${PG_BIN}/pg_config`,
    `PATH=${PG_BIN}:/usr/bin:/bin`,
    `XDG_RUNTIME_DIR=${join(dirOf(name), 'xdg-data')}`,
    // The socket in the machine's own folder, for the server (PG_REGRESS_SOCK_DIR) and for every
    // connection pg_autoctl makes without a host (PGHOST): /var/run/postgresql is the system
    // server's, and a network namespace does not separate files. The port is not 5432 either.
    `PG_REGRESS_SOCK_DIR=${dirOf(name)}`,
    `PGHOST=${dirOf(name)}`,
    `PGPORT=${PG_PORT}`,
  ];
  const spawnIn = (name, args) => {
    const argv = ['netns', 'exec', nsOf(name), 'runuser', '-u', user.name, '--', ...envArgs(name), ...args];
    const child = spawn('ip', argv, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const write = (chunk) => appendFileSync(logOf(name), chunk);
    child.stdout.on('data', write);
    child.stderr.on('data', write);
    child.on('error', (err) => write(`spawn failed: ${err.message}\n`));
    children.set(name, child);
    return child;
  };
  // The monitor's database, through its own socket as the postgres user (its pg_hba lets the
  // nodes' autoctl_node in from the LAN, not an administrator). Only the rig's constants reach the
  // SQL text (node names are checked below).
  const sqlOn = (name, db, sql) => {
    const result = spawnSync(
      'ip',
      [
        'netns',
        'exec',
        nsOf(name),
        'runuser',
        '-u',
        user.name,
        '--',
        `${PG_BIN}/psql`,
        '-X',
        '-v',
        'ON_ERROR_STOP=1',
        '-At',
        '-h',
        dirOf(name),
        '-p',
        String(PG_PORT),
        '-d',
        db,
        '-c',
        sql,
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    if (result.status !== 0)
      throw new Error(`${name}: ${(result.stderr || result.error?.message || '').trim()}`);
    return result.stdout.trim();
  };
  const monitorSql = (sql) => sqlOn('dcs', MONITOR_DB, sql);
  const created = new Set();

  return {
    name: 'pg_auto_failover',
    settings,
    async start() {
      const monitorDir = prepare('dcs');
      spawnIn('dcs', [
        'pg_autoctl',
        'create',
        'monitor',
        `--pgdata=${join(monitorDir, 'data')}`,
        `--pgport=${PG_PORT}`,
        `--hostname=${addressOf('dcs')}`,
        '--auth=trust',
        '--no-ssl',
        `--pgctl=${PG_BIN}/pg_ctl`,
        '--run',
      ]);
      await waitFor(
        () => monitorSql(`SELECT count(*) FROM pg_extension WHERE extname = 'pgautofailover'`) === '1',
        120_000,
        'the monitor',
      );
      for (const [key, value] of Object.entries(settings.monitor)) {
        monitorSql(`ALTER SYSTEM SET ${key} = '${value}'`);
      }
      monitorSql('SELECT pg_reload_conf()');
      for (const [i, name] of nodes.entries()) {
        if (!/^pg[1-9]$/.test(name)) throw new Error(`ha: node name ${name}`);
        this.startNode(name);
        const wanted = i === 0 ? `'single', 'primary'` : `'secondary'`;
        await waitFor(
          () =>
            monitorSql(
              `SELECT count(*) FROM pgautofailover.node WHERE nodename = '${name}' AND reportedstate IN (${wanted})`,
            ) === '1',
          300_000,
          `${name} to join`,
        );
      }
      // Each setting is refused while the formation is moving (a node applying the last one):
      // sent again until the monitor takes it, then the nodes settle.
      const settled = () =>
        monitorSql(
          `SELECT count(*) = ${nodes.length} AND bool_and(reportedstate = goalstate) FROM pgautofailover.node`,
        ) === 't';
      const apply = async (sql, what) => {
        await waitFor(settled, 120_000, 'the formation to settle');
        await waitFor(() => monitorSql(sql) !== null, 120_000, what);
      };
      await apply(
        `SELECT pgautofailover.set_formation_number_sync_standbys('default', ${settings.number_sync_standbys})`,
        'number_sync_standbys',
      );
      await waitFor(settled, 120_000, 'the formation to settle');
      // Async: commits are acknowledged before any standby has them. Every node gets it (ALTER
      // SYSTEM writes postgresql.auto.conf, which pg_autoctl leaves alone; a standby reads it when
      // promoted).
      if (settings.synchronous_commit !== 'on') {
        for (const name of nodes) {
          sqlOn(name, 'postgres', `ALTER SYSTEM SET synchronous_commit = '${settings.synchronous_commit}'`);
          sqlOn(name, 'postgres', 'SELECT pg_reload_conf()');
        }
      }
    },
    /** Creates node `name` (the first time) or runs its keeper again (after a kill). */
    startNode(name) {
      const dir = prepare(name);
      const pgdata = join(dir, 'data');
      if (!created.has(name)) {
        created.add(name);
        spawnIn(name, [
          'pg_autoctl',
          'create',
          'postgres',
          `--pgdata=${pgdata}`,
          `--pgport=${PG_PORT}`,
          `--hostname=${addressOf(name)}`,
          `--name=${name}`,
          `--monitor=${monitorUrl}`,
          '--auth=trust',
          '--pg-hba-lan',
          '--no-ssl',
          `--pgctl=${PG_BIN}/pg_ctl`,
          '--run',
        ]);
      } else {
        spawnIn(name, ['pg_autoctl', 'run', `--pgdata=${pgdata}`]);
      }
      log(`pg_auto_failover: keeper of ${name} started`);
    },
    rewinds(name) {
      try {
        return (readFileSync(logOf(name), 'utf8').match(/pg_rewind/gi) ?? []).length;
      } catch {
        return 0;
      }
    },
    logOf,
    /** The monitor's view of the nodes, for the report. */
    states() {
      try {
        return monitorSql(
          `SELECT string_agg(nodename || ' ' || reportedstate || '/' || goalstate, ', ' ORDER BY nodeid) FROM pgautofailover.node`,
        );
      } catch (err) {
        return `unknown (${err.message})`;
      }
    },
    stop() {
      for (const child of children.values()) child.kill('SIGKILL');
    },
  };
}

/** Whether `pg_autoctl` can be run. */
export function hasPgAutoctl() {
  return !spawnSync('pg_autoctl', ['version'], { encoding: 'utf8' }).error;
}

async function waitFor(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`ha: timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
