import { type ChildProcess, fork } from 'node:child_process';
import type { WorkerCounters } from '../index.js';
import { packageFilePath } from '../shared/package-files.js';
import type { DemoWorkerConfig, FromWorkerMessage, ToWorkerMessage } from './messages.js';
import { abortError, waitUntil } from './wait.js';

const WORKER_SCRIPT = packageFilePath('demo/worker-process.js');
const STDERR_TAIL_CHARS = 2000;

/** What happened to a demo worker process. */
export type DemoWorkerFate = 'running' | 'killed' | 'paused' | 'stopped' | 'crashed';

/**
 * The orchestrator's handle on one worker process: starts it, kills, pauses and resumes it with
 * signals, stops it gracefully, and keeps the last counters it reported.
 */
export class DemoWorker {
  /** Its number in the demo, 1 to 3. */
  readonly number: number;
  /** Last reported counters (final ones after a graceful stop). */
  counters: WorkerCounters | null = null;
  /** Jobs it holds (running, or awaiting their outcome write), as last reported. */
  active = 0;
  /** True once it reported its final counters after a graceful stop. */
  stoppedCleanly = false;
  /** Why it failed, if it exited on its own or reported a failure. */
  failure: string | null = null;
  /** What the orchestrator did to it, or what became of it. */
  fate: DemoWorkerFate = 'running';
  /** How long it was paused (SIGSTOP to SIGCONT), in ms. */
  pausedForMs = 0;
  readonly #child: ChildProcess;
  readonly #onRuns: (worker: number, jobIds: string[]) => void;
  #owner: string | null = null;
  #onBusy: (() => void) | null = null;
  #exited = false;
  #pausedAt = 0;
  #stderr = '';

  /** Forks the worker process; `onRuns` receives the ids of jobs whose handler succeeded in it. */
  constructor(number: number, onRuns: (worker: number, jobIds: string[]) => void) {
    this.number = number;
    this.#onRuns = onRuns;
    // Its own process group: a Ctrl-C in the terminal reaches only the orchestrator, which decides.
    this.#child = fork(WORKER_SCRIPT, [], { detached: true, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    this.#child.stderr?.on('data', (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString('utf8')).slice(-STDERR_TAIL_CHARS);
    });
    this.#child.on('message', (message: FromWorkerMessage) => this.#receive(message));
    this.#child.on('exit', (code, signal) => {
      this.#exited = true;
      if (this.fate === 'running' || this.fate === 'paused') {
        this.fate = 'crashed';
        const lastLine = this.#stderr.trim().split('\n').at(-1);
        this.failure ??= `worker ${number} exited unexpectedly (${signal ?? `code ${code}`})${lastLine ? `: ${lastLine}` : ''}`;
      }
    });
    this.#child.on('error', (err) => {
      this.failure ??= `worker ${number}: ${err.message}`;
    });
  }

  /** Its lease owner name, once started. */
  get owner(): string | null {
    return this.#owner;
  }

  /** Sends the configuration and waits until its worker has started. */
  async start(config: DemoWorkerConfig, signal: AbortSignal): Promise<void> {
    this.#send({ type: 'start', config });
    await waitUntil(() => this.#owner !== null || this.#throwIfFailed(), {
      signal,
      what: `worker ${this.number} to start`,
    });
  }

  /** Throws if the process failed; used by waits so that a crash ends them at once. */
  throwIfFailed(): void {
    this.#throwIfFailed();
  }

  /**
   * Resolves on the first status showing handlers running right now, so that a signal sent at
   * once finds work in progress: a status is a few milliseconds old, a handler runs for tens.
   * Resolves anyway after `patienceMs` (a worker with nothing left to do).
   */
  whenBusy(signal: AbortSignal, patienceMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const finish = (error?: Error) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.#onBusy = null;
        if (error) reject(error);
        else resolve();
      };
      const onAbort = () => finish(abortError(signal, `worker ${this.number} to be busy`));
      const timer = setTimeout(() => finish(), patienceMs);
      signal.addEventListener('abort', onAbort);
      this.#onBusy = () => finish();
      if (signal.aborted) onAbort();
    });
  }

  /** SIGKILL: no cleanup at all; its leases are left to expire. */
  kill(): void {
    this.fate = 'killed';
    this.#child.kill('SIGKILL');
  }

  /** SIGSTOP: frozen mid-flight, its leases lapse while it cannot notice. */
  pause(): void {
    this.fate = 'paused';
    this.#pausedAt = performance.now();
    this.#child.kill('SIGSTOP');
  }

  /** SIGCONT: it carries on, unaware of the time that passed. */
  resume(): void {
    this.fate = 'running';
    this.pausedForMs += performance.now() - this.#pausedAt;
    this.#child.kill('SIGCONT');
  }

  /**
   * Asks for a graceful stop and waits for its final counters and its exit, for at most
   * `timeoutMs`: then it is killed, and the failure recorded.
   */
  async stop(signal: AbortSignal, timeoutMs: number): Promise<void> {
    this.fate = 'stopped';
    this.#send({ type: 'stop' });
    const stopAt = performance.now() + timeoutMs;
    await waitUntil(() => this.#exited || performance.now() >= stopAt || this.#throwIfFailed(), {
      signal,
      what: `worker ${this.number} to stop`,
    });
    if (!this.#exited) {
      this.forceKill();
      this.failure ??= `worker ${this.number} did not stop within ${timeoutMs} ms`;
    } else if (!this.stoppedCleanly) {
      this.failure ??= `worker ${this.number} exited without reporting its final counters`;
    }
  }

  /** Kills the process if it is still there (cleanup after an error or an interruption). */
  forceKill(): void {
    if (this.#exited) return;
    // SIGKILL reaches a stopped process too.
    this.#child.kill('SIGKILL');
  }

  #send(message: ToWorkerMessage): void {
    if (this.#child.connected) this.#child.send(message);
  }

  #throwIfFailed(): false {
    if (this.failure) throw new Error(this.failure);
    return false;
  }

  #receive(message: FromWorkerMessage): void {
    switch (message.type) {
      case 'ready':
        this.#owner = message.owner;
        break;
      case 'status':
        this.counters = message.counters;
        this.active = message.active;
        this.#onRuns(this.number, message.ran);
        if (message.handling > 0) this.#onBusy?.();
        break;
      case 'stopped':
        this.counters = message.counters;
        this.active = 0;
        this.stoppedCleanly = true;
        this.#onRuns(this.number, message.ran);
        break;
      case 'failed':
        this.failure ??= `worker ${this.number} failed: ${message.message}`;
        break;
    }
  }
}
