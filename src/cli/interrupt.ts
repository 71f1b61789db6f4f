import { CliError } from './errors.js';

const WATCHED_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * The process's termination signals, as seen by one command. The first SIGINT, SIGTERM or SIGHUP
 * asks the command to finish (it stops what it runs and cleans up, an embedded server included);
 * a second one means "now" and exits at once with 130.
 */
export class Interrupt {
  readonly #controller = new AbortController();
  readonly #listener = (signal: NodeJS.Signals) => this.#receive(signal);
  #received: NodeJS.Signals | null = null;
  #waiters: ((signal: NodeJS.Signals) => void)[] = [];
  #onForce: (() => void) | null = null;

  constructor() {
    for (const signal of WATCHED_SIGNALS) process.on(signal, this.#listener);
  }

  /** Aborted at the first signal; its reason is a `CliError` with exit code 130. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The first signal received, if any. */
  get received(): NodeJS.Signals | null {
    return this.#received;
  }

  /** Resolves with the first signal (at once if one was already received). */
  wait(): Promise<NodeJS.Signals> {
    const received = this.#received;
    if (received) return Promise.resolve(received);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Throws the interruption, if a signal was received, so a command stops between steps. */
  throwIfReceived(): void {
    this.#controller.signal.throwIfAborted();
  }

  /** Runs `action` (e.g. kill child processes) before a second signal exits the process. */
  onForce(action: () => void): void {
    this.#onForce = action;
  }

  /** Stops watching. */
  dispose(): void {
    for (const signal of WATCHED_SIGNALS) process.off(signal, this.#listener);
  }

  #receive(signal: NodeJS.Signals): void {
    if (this.#received) {
      this.#onForce?.();
      process.stderr.write(`leasehold: second ${signal}: exiting now\n`);
      process.exit(130);
    }
    this.#received = signal;
    this.#controller.abort(new CliError(`interrupted by ${signal}`, 130));
    for (const resolve of this.#waiters.splice(0)) resolve(signal);
  }
}
