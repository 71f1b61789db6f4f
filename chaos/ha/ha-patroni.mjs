// Patroni with etcd, as the high-availability rig (chaos/ha/ha-run.mjs) runs it: etcd in the `dcs`
// machine, one Patroni agent per PostgreSQL node, Debian's PostgreSQL 15 binaries. Failover,
// fencing (a primary that loses etcd demotes itself) and rejoin (pg_rewind) are Patroni's own.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { addressOf, nsOf } from './ha-net.mjs';

export const PG_BIN = '/usr/lib/postgresql/15/bin';
/**
 * Every PostgreSQL of the cluster listens here, in its own namespace: not 5432, so that a
 * connection that went to a socket file by mistake (the folder /var/run/postgresql is shared with
 * the machine's own server) finds nothing.
 */
export const PG_PORT = 7432;

/**
 * The settings that decide what a failover may lose (docs/operations.md, the Patroni table).
 * `sync`: synchronous_mode (Patroni names a synchronous standby and promotes only it, or a node
 * it knows is in sync), synchronous_commit on. `async`: no synchronous standby; a replica may be
 * promoted if it is at most maximum_lag_on_failover bytes behind.
 */
export function patroniSettings(mode, lagBytes) {
  return {
    ttl: 10,
    loop_wait: 1,
    retry_timeout: 4,
    maximum_lag_on_failover: lagBytes,
    synchronous_mode: mode === 'sync',
    synchronous_mode_strict: false,
    synchronous_node_count: 1,
    synchronous_commit: 'on',
  };
}

/** The Patroni manager: start, observe and restart its agents. */
export function patroni({ root, nodes, mode, lagBytes, user, log }) {
  const settings = patroniSettings(mode, lagBytes);
  const children = new Map();
  const logOf = (name) => join(root, `${name}.log`);

  const spawnIn = (name, file, args, runAsUser) => {
    const argv = runAsUser
      ? ['netns', 'exec', nsOf(name), 'runuser', '-u', user.name, '--', file, ...args]
      : ['netns', 'exec', nsOf(name), file, ...args];
    const child = spawn('ip', argv, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const write = (chunk) => appendFileSync(logOf(name), chunk);
    child.stdout.on('data', write);
    child.stderr.on('data', write);
    child.on('error', (err) => write(`spawn failed: ${err.message}\n`));
    children.set(name, child);
    return child;
  };

  const configFor = (name) => {
    const dir = join(root, name);
    mkdirSync(dir, { recursive: true });
    chownSync(dir, user.uid, user.gid);
    const address = addressOf(name);
    // JSON is YAML: Patroni reads this as its configuration file.
    const config = {
      scope: 'leasehold-ha',
      name,
      log: { level: 'INFO' },
      restapi: { listen: `${address}:8008`, connect_address: `${address}:8008` },
      etcd3: { hosts: `${addressOf('dcs')}:2379` },
      bootstrap: {
        dcs: {
          ttl: settings.ttl,
          loop_wait: settings.loop_wait,
          retry_timeout: settings.retry_timeout,
          maximum_lag_on_failover: settings.maximum_lag_on_failover,
          synchronous_mode: settings.synchronous_mode,
          synchronous_mode_strict: settings.synchronous_mode_strict,
          synchronous_node_count: settings.synchronous_node_count,
          postgresql: {
            use_pg_rewind: true,
            remove_data_directory_on_rewind_failure: true,
            parameters: {
              wal_level: 'replica',
              hot_standby: 'on',
              wal_log_hints: 'on',
              max_wal_senders: 10,
              max_replication_slots: 10,
              wal_keep_size: '1GB',
              max_connections: 120,
              synchronous_commit: settings.synchronous_commit,
              // The rig kills processes, never the machine: the OS keeps what was written.
              fsync: 'off',
              full_page_writes: 'on',
            },
          },
        },
        initdb: [{ encoding: 'UTF8' }, { locale: 'C' }],
        pg_hba: [
          'local all all trust',
          'host replication all 10.232.0.0/24 trust',
          'host all all 10.232.0.0/24 trust',
          'host all all 127.0.0.1/32 trust',
        ],
      },
      postgresql: {
        listen: `${address},127.0.0.1:${PG_PORT}`,
        connect_address: `${address}:${PG_PORT}`,
        data_dir: join(dir, 'data'),
        bin_dir: PG_BIN,
        pgpass: join(dir, 'pgpass'),
        authentication: {
          superuser: { username: 'postgres', password: 'unused' },
          replication: { username: 'postgres', password: 'unused' },
          rewind: { username: 'postgres', password: 'unused' },
        },
        parameters: { unix_socket_directories: dir },
        // A node rebuilt from the leader (a failed rewind, a reinit) copies it without waiting for
        // a spread checkpoint: under load that wait took minutes (checkpoint_timeout 5 min).
        basebackup: [{ checkpoint: 'fast' }],
      },
    };
    const file = join(dir, 'patroni.yml');
    writeFileSync(file, JSON.stringify(config, null, 2));
    chownSync(file, user.uid, user.gid);
    return file;
  };

  return {
    name: 'patroni',
    settings,
    /** Starts etcd, then every node's agent; the first to win the leader key bootstraps. */
    async start() {
      const etcdDir = join(root, 'etcd');
      mkdirSync(etcdDir, { recursive: true });
      const dcs = addressOf('dcs');
      spawnIn(
        'dcs',
        'etcd',
        [
          '--name=dcs',
          `--data-dir=${etcdDir}`,
          `--listen-client-urls=http://${dcs}:2379`,
          `--advertise-client-urls=http://${dcs}:2379`,
          `--listen-peer-urls=http://${dcs}:2380`,
          `--initial-advertise-peer-urls=http://${dcs}:2380`,
          `--initial-cluster=dcs=http://${dcs}:2380`,
        ],
        false,
      );
      await waitHttp(`http://${dcs}:2379/health`, 30_000, 'etcd');
      for (const [i, name] of nodes.entries()) {
        this.startNode(name);
        // The first node bootstraps alone; the others then copy it with pg_basebackup.
        if (i === 0) await waitHttp(`http://${addressOf(name)}:8008/primary`, 120_000, `${name} as primary`);
      }
    },
    /** Starts (or starts again, after a kill) the agent of node `name`. */
    startNode(name) {
      const file = configFor(name);
      spawnIn(name, 'patroni', [file], true);
      log(`patroni: agent of ${name} started`);
    },
    /** Whether node `name`'s agent rewound its data folder (pg_rewind) since the rig started. */
    rewinds(name) {
      try {
        return (readFileSync(logOf(name), 'utf8').match(/pg_rewind|rewind/gi) ?? []).length;
      } catch {
        return 0;
      }
    },
    /**
     * What an operator does with a node that cannot follow the new primary (its WAL went past the
     * point where the new primary's timeline forked, and the agent did not rewind it): `patronictl
     * reinit`, a new copy of the leader. Returns patronictl's exit status.
     */
    reinit(name) {
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
          'patronictl',
          '-c',
          configFor(name),
          'reinit',
          'leasehold-ha',
          name,
          '--force',
        ],
        { encoding: 'utf8', timeout: 60_000 },
      );
      appendFileSync(logOf(name), `rig: patronictl reinit ${name}: ${result.stdout}${result.stderr}\n`);
      return result.status;
    },
    /** Where each agent logs. */
    logOf,
    stop() {
      for (const child of children.values()) child.kill('SIGKILL');
    },
  };
}

/** Polls `url` until it answers 200 or `timeoutMs` passes (then throws, naming `what`). */
export async function waitHttp(url, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (response.status === 200) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`ha: timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
