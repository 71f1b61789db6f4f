/** What the slot pool needs of a queue's claim loop (a `SlotHolder`). */
export interface SlotHolder {
  /** Slots this queue holds now (running and buffered jobs). */
  readonly held: number;
  /** Whether the queue may have pending work. */
  readonly wanted: boolean;
  readonly config: { readonly concurrency: number; readonly weight: number };
  /** Jobs the queue may claim ahead of its free slots now (its fixed prefetch; pooled queues never adapt). */
  readonly prefetch: number;
  /** Asks the queue to claim again soon. */
  schedulePump(): void;
}

/**
 * A worker's handler slots shared by weighted queues (the worker's `slots` option).
 *
 * Free slots go, one at a time, to the queue with pending work whose holding per unit of weight
 * (slots held / weight) is lowest, never beyond that queue's own `concurrency` (plus `prefetch`).
 * So with every queue backlogged, holdings converge to the weights; a queue without pending work
 * (its last claim came back short and nothing woke it since) takes no share, and its slots go to
 * the others. Running jobs are never preempted: a queue that wakes up gets its share as slots free.
 * Slots a claim has asked for count as held until it answers, so two queues cannot both count on
 * the same free slot.
 */
export class SlotPool {
  readonly #runners: SlotHolder[] = [];
  readonly #reserved = new Map<SlotHolder, number>();

  constructor(readonly slots: number) {}

  /** Adds a queue to the pool. */
  register(runner: SlotHolder): void {
    this.#runners.push(runner);
    this.#reserved.set(runner, 0);
  }

  /** Counts `n` slots as held while a claim for them is in flight. */
  reserve(runner: SlotHolder, n: number): void {
    this.#reserved.set(runner, (this.#reserved.get(runner) ?? 0) + n);
  }

  /** The claim answered: its rows are now counted by the runner itself. */
  release(runner: SlotHolder, n: number): void {
    this.#reserved.set(runner, (this.#reserved.get(runner) ?? 0) - n);
  }

  /** How many of the free slots are this queue's to claim now. */
  roomFor(runner: SlotHolder): number {
    const held = new Map<SlotHolder, number>();
    let free = this.slots;
    for (const r of this.#runners) {
      const h = r.held + (this.#reserved.get(r) ?? 0);
      held.set(r, h);
      free -= h;
    }
    if (free <= 0) return 0;
    // Queues competing for the free slots: those that may have work, and the one asking.
    const competing = this.#runners.filter((r) => r === runner || r.wanted);
    let granted = 0;
    for (; free > 0; free--) {
      let best: SlotHolder | null = null;
      let bestLoad = Number.POSITIVE_INFINITY;
      for (const r of competing) {
        const h = held.get(r) as number;
        if (h >= r.config.concurrency + r.prefetch) continue;
        const load = h / r.config.weight;
        if (load < bestLoad) {
          best = r;
          bestLoad = load;
        }
      }
      if (!best) break;
      held.set(best, (held.get(best) as number) + 1);
      if (best === runner) granted++;
    }
    return granted;
  }

  /** A slot was freed (or a queue ran dry): let the other queues with work claim their share. */
  slotFreed(from: SlotHolder): void {
    for (const r of this.#runners) {
      if (r !== from && r.wanted) r.schedulePump();
    }
  }
}
