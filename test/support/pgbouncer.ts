import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/embedded.js';

/** A PgBouncer in transaction pooling mode in front of one PostgreSQL server, for the tests. */
export interface TestBouncer {
  /** The pooled connection string (same user, password and database as the server's). */
  connectionString: string;
  /** Stops PgBouncer and removes its folder. */
  stop(): Promise<void>;
}

/** Where the Debian package installs PgBouncer. */
const PGBOUNCER_PATHS = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'];

/**
 * The PgBouncer binary; throws, saying how to install it, when there is none. PgBouncer is not on
 * npm, which is why the tests that need it are a suite of their own (`npm run test:system`).
 */
export function pgBouncerBinary(): string {
  const found = PGBOUNCER_PATHS.find((path) => existsSync(path));
  if (found) return found;
  throw new Error(
    `PgBouncer is not installed (looked for ${PGBOUNCER_PATHS.join(' and ')}): the system suite ` +
      '(npm run test:system) and LEASEHOLD_TEST_PGBOUNCER=1 need it. Install it with ' +
      '`apt-get install -y pgbouncer` (Debian/Ubuntu), or run `npm test`, which needs no system package.',
  );
}

/**
 * Starts PgBouncer (the Debian package's binary) on a free loopback port, pooling in transaction
 * mode towards `serverUrl`, with trust authentication for that URL's user. As root it runs as the
 * `postgres` system user, since PgBouncer refuses to run as root.
 */
export async function startPgBouncer(serverUrl: string, poolSize: number): Promise<TestBouncer> {
  const binary = pgBouncerBinary();
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-pgbouncer-'));
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const quoted = (value: string) => `"${value.replace(/"/g, '""')}"`;
  // The auth file lists the user (trust still needs it) and the password PgBouncer logs in with.
  writeFileSync(join(dir, 'userlist.txt'), `${quoted(user)} ${quoted(password)}\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || '5432'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      'max_client_conn = 2000',
      `default_pool_size = ${poolSize}`,
      `max_db_connections = ${poolSize}`,
      'server_login_retry = 1',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      'log_connections = 0',
      'log_disconnections = 0',
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      '',
    ].join('\n'),
  );
  const args = [join(dir, 'pgbouncer.ini')];
  if (isRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chmodSync(dir, 0o700);
    chownSync(dir, uid, gid);
    args.unshift('-u', 'postgres');
  }
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  // Read (the pipe must not fill up), keeping the tail for a start-up failure's message.
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8000);
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    // Not installed (ENOENT) or not runnable: say what to do instead of timing out.
    child.once('error', (err) => {
      stderr += `${err.message}: install it with apt-get install -y pgbouncer\n`;
      resolve(null);
    });
  });
  const connectionString = `postgres://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}${server.pathname || '/postgres'}`;
  // If the run ends without stop(), PgBouncer must not be left behind.
  const killOnExit = () => child.kill('SIGTERM');
  process.on('exit', killOnExit);
  const stop = async () => {
    process.off('exit', killOnExit);
    await stopChild(child, exited);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitUntilAnswering(connectionString, exited);
  } catch (err) {
    const log = existsSync(join(dir, 'pgbouncer.log'))
      ? readFileSync(join(dir, 'pgbouncer.log'), 'utf8')
      : '';
    await stop();
    throw new Error(`PgBouncer did not start: ${(err as Error).message}\n${stderr}${log}`);
  }
  return { connectionString, stop };
}

async function waitUntilAnswering(url: string, exited: Promise<number | null>): Promise<void> {
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (gone) throw new Error('pgbouncer exited');
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  // SIGTERM: PgBouncer closes every connection at once and exits.
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}
