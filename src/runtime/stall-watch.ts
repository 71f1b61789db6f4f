import type { OutstandingStatement } from '../connection/statement-watch.js';

/**
 * Raises a signal when a statement of the worker's client has waited for its answer longer than
 * the worker's shortest lease: by then the leases it was renewing or completing have lapsed, and a
 * dead connection, a paused server or a commit waiting for a lost synchronous standby would
 * otherwise show as silence. One signal per episode: again only after the oldest statement has
 * come back under the limit. Reads only the client's own record of outstanding statements.
 */
export class StallWatch {
  #timer: NodeJS.Timeout | null = null;
  #raised = false;

  constructor(
    private readonly oldest: () => OutstandingStatement | null,
    private readonly limitMs: number,
    private readonly onStalled: (statement: OutstandingStatement) => void,
  ) {}

  /** Starts checking, a few times per limit (at most every second). */
  start(): void {
    if (this.#timer) return;
    const every = Math.max(50, Math.min(1000, this.limitMs / 4));
    this.#timer = setInterval(() => this.check(), every);
    this.#timer.unref();
  }

  /** Stops checking. */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** One check: signals when the oldest statement has passed the limit. */
  check(): void {
    const oldest = this.oldest();
    if (!oldest || oldest.outstandingMs <= this.limitMs) {
      this.#raised = false;
      return;
    }
    if (this.#raised) return;
    this.#raised = true;
    this.onStalled(oldest);
  }
}
