import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import type { Worker } from '../../src/index.js';
import { watchOutput } from './child-output.js';
import { databaseUrl } from './db.js';

const running = new Set<Worker>();
const children = new Set<ChildProcess>();

/** Starts a worker and makes sure it is stopped after the test, whatever happens. */
export async function started(worker: Worker): Promise<Worker> {
  running.add(worker);
  await worker.start();
  return worker;
}

afterEach(async () => {
  const leftover = [...running];
  running.clear();
  await Promise.all(leftover.map((w) => w.stop()));
  for (const child of children) child.kill('SIGKILL');
  children.clear();
});

/** A message a child worker sends its parent. */
export type ChildMessage =
  | { type: 'started' }
  | { type: 'begin'; id: string }
  | { type: 'done'; id: string }
  | { type: 'effect'; id: string; key: string }
  | { type: 'step'; id: string; name: string }
  | { type: 'invoked'; id: string }
  | { type: 'error'; message: string };

/** Forks a worker process running the built package (see child-worker.mjs); resolves once it runs. */
export async function forkWorker(config: Record<string, unknown>): Promise<{
  child: ChildProcess;
  messages: ChildMessage[];
}> {
  const script = fileURLToPath(new URL('./child-worker.mjs', import.meta.url));
  // Its output is kept, and printed only when the test fails: a child worker that loses a lease on
  // purpose (a restart, a pause) says so on stderr, which is expected, not news for the run's log.
  const child = fork(script, [], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  children.add(child);
  watchOutput(child, 'child worker');
  const messages: ChildMessage[] = [];
  const startedPromise = new Promise<void>((resolve, reject) => {
    child.on('message', (message: ChildMessage) => {
      messages.push(message);
      if (message.type === 'started') resolve();
    });
    child.once('exit', (code) => reject(new Error(`child worker exited early (${code})`)));
  });
  child.send({ databaseUrl: databaseUrl(), ...config });
  await startedPromise;
  return { child, messages };
}

/** Kills a child with SIGKILL and waits for it to be gone. */
export async function killHard(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGKILL');
  await gone;
  children.delete(child);
}

/** A promise with its resolve function, for handlers that wait on the test. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
