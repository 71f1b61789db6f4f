// The harness's handle on its worker processes: fork, signal (kill, pause, resume), block the event
// loop of one, stop gracefully, and the last status each reported.
import { fork, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const WORKER_SCRIPT = fileURLToPath(new URL('./worker-process.mjs', import.meta.url));
const SKEW_PRELOAD = fileURLToPath(new URL('../faults/skew-clock.mjs', import.meta.url));
const STDERR_TAIL = 2000;

/** One worker process. */
export class ChaosWorker {
  /** e.g. `w3`; also the application_name of its Leasehold connections. */
  label;
  /** Its lease owner name once ready (the manual claimers use `${owner}:txn`). */
  owner = null;
  /** Wall-clock skew of its preloaded clock, in ms (0: none). */
  skewMs;
  /** 'running' | 'paused' | 'killed' | 'stopped' | 'crashed'. */
  fate = 'running';
  /** Last status: { handling, handlingLong, txnHandling, listenerPid, counters, txn }. */
  status = null;
  /** When the last status arrived (performance.now()). */
  statusAt = 0;
  /** Final counters after a graceful stop. */
  final = null;
  #child;
  #exited = false;
  #stderr = '';
  #waiters = [];

  /**
   * `options.netns`: a network namespace to run the process in (`ip netns exec`, which replaces
   * itself with node: the pid, the signals and the IPC channel are the worker's own).
   */
  constructor(label, skewMs, options = {}) {
    this.label = label;
    this.skewMs = skewMs;
    const execArgv = skewMs === 0 ? [] : ['--import', SKEW_PRELOAD];
    const spawnOptions = {
      // Its own process group: a Ctrl-C reaches the harness only, which then stops everything.
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      env: { ...process.env, CHAOS_CLOCK_SKEW_MS: String(skewMs) },
    };
    this.#child = options.netns
      ? spawn(
          'ip',
          ['netns', 'exec', options.netns, process.execPath, ...execArgv, WORKER_SCRIPT],
          spawnOptions,
        )
      : fork(WORKER_SCRIPT, [], { ...spawnOptions, execArgv });
    this.#child.stderr.on('data', (chunk) => {
      this.#stderr = (this.#stderr + chunk).slice(-STDERR_TAIL);
    });
    this.#child.on('message', (message) => this.#receive(message));
    this.#child.on('exit', (code, signal) => {
      this.#exited = true;
      if (this.fate === 'running' || this.fate === 'paused') {
        this.fate = 'crashed';
        this.failure ??= `${label} exited unexpectedly (${signal ?? code}): ${this.#stderr.trim().slice(-1200)}`;
      }
      this.#notify();
    });
  }

  /** The process id (for the record). */
  get pid() {
    return this.#child.pid;
  }

  /** Sends the configuration and waits until its worker runs. */
  async start(config, timeoutMs = 30_000) {
    this.#child.send({ type: 'start', config: { ...config, label: this.label } });
    await this.#until(() => this.owner !== null, timeoutMs, 'to start');
  }

  /** SIGKILL: no cleanup; its leases are left to expire. */
  kill() {
    this.fate = 'killed';
    this.#child.kill('SIGKILL');
  }

  /** SIGSTOP: frozen; its leases may lapse while it cannot notice. */
  pause() {
    this.fate = 'paused';
    this.#child.kill('SIGSTOP');
  }

  /** SIGCONT: it carries on, unaware of the time that passed. */
  resume() {
    this.fate = 'running';
    this.#child.kill('SIGCONT');
  }

  /** Makes its next handler block the event loop for `ms`. */
  blockNext(ms) {
    this.#child.send({ type: 'block', ms });
  }

  /** Asks for a graceful stop (handlers finish, ledger drained); kills it after `timeoutMs`. */
  async stop(timeoutMs) {
    if (this.#exited) return;
    this.fate = 'stopped';
    if (this.#child.connected) this.#child.send({ type: 'stop' });
    try {
      await this.#until(() => this.#exited, timeoutMs, 'to stop');
    } catch (err) {
      this.forceKill();
      throw err;
    }
  }

  /** SIGKILL if still there (cleanup); reaches a stopped process too. */
  forceKill() {
    if (!this.#exited) this.#child.kill('SIGKILL');
  }

  #receive(message) {
    if (message.type === 'ready') this.owner = message.owner;
    else if (message.type === 'status') {
      this.status = message;
      this.statusAt = performance.now();
    } else if (message.type === 'stopped') this.final = message;
    else if (message.type === 'failed') this.failure ??= `${this.label} failed: ${message.message}`;
    this.#notify();
  }

  #notify() {
    for (const waiter of [...this.#waiters]) waiter();
  }

  // Waits for `done()`; rejects on failure, or on timeout when `what` names the wait.
  #until(done, timeoutMs, what) {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.failure && what) finish(new Error(this.failure));
        else if (done()) finish();
      };
      const finish = (err) => {
        clearTimeout(timer);
        this.#waiters = this.#waiters.filter((w) => w !== check);
        if (err) reject(err);
        else resolve();
      };
      const timer = setTimeout(
        () =>
          finish(what ? new Error(`${this.label} did not manage ${what} within ${timeoutMs} ms`) : undefined),
        timeoutMs,
      );
      this.#waiters.push(check);
      check();
    });
  }
}
