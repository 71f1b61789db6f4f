/**
 * Coalesces the wake-up notifications of autocommit enqueues, per queue, within one process.
 *
 * A transaction that calls pg_notify takes a database-wide lock while it commits, so notifying
 * transactions commit one at a time: sixteen callers enqueueing at once cannot share a WAL flush,
 * and enqueue throughput falls to a fraction of a plain insert's. Workers only need to be woken,
 * not told about every job, so: the first enqueue of a queue in a window notifies in its own
 * statement (an idle worker wakes at once); later enqueues in the window insert quietly, and one
 * trailing notification is sent `windowMs` later, after they committed. The table stays the
 * truth, and the workers' poll still drains it if a notification is lost.
 */
export class WakeupCoalescer {
  readonly #lastInline = new Map<string, number>();
  readonly #trailing = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly windowMs: number,
    private readonly send: (queue: string) => Promise<void>,
  ) {}

  /** True when this enqueue should notify in its own statement; false: insert quietly. */
  notifyInline(queue: string): boolean {
    const now = performance.now();
    const last = this.#lastInline.get(queue);
    if (last !== undefined && now - last < this.windowMs) return false;
    this.#lastInline.set(queue, now);
    return true;
  }

  /** Called after a quiet insert committed: makes sure one notification follows within the window. */
  quietInsertCommitted(queue: string): void {
    if (this.#trailing.has(queue)) return;
    const timer = setTimeout(() => {
      this.#trailing.delete(queue);
      this.#lastInline.set(queue, performance.now());
      this.send(queue).catch(() => {
        // The workers' periodic poll finds the job anyway.
      });
    }, this.windowMs);
    this.#trailing.set(queue, timer);
  }

  /** Sends every pending trailing notification now (before the pool closes). */
  async flush(): Promise<void> {
    const queues = [...this.#trailing.keys()];
    for (const timer of this.#trailing.values()) clearTimeout(timer);
    this.#trailing.clear();
    await Promise.all(queues.map((queue) => this.send(queue).catch(() => {})));
  }
}
