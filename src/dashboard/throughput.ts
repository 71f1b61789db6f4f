/** One sample of completions per queue. */
export interface ThroughputSample {
  /** When, in ms since the epoch. */
  at: number;
  /** Jobs completed in the minute before `at`, per queue. */
  perQueue: Record<string, number>;
}

/**
 * A short history of throughput for the dashboard's chart: the stats' completions within the last
 * minute, sampled at most every `minIntervalMs` and kept for `keepMs`. In memory only: a restarted
 * dashboard starts a fresh chart.
 */
export class ThroughputHistory {
  readonly #samples: ThroughputSample[] = [];

  constructor(
    private readonly keepMs = 10 * 60_000,
    private readonly minIntervalMs = 2_000,
  ) {}

  /** Records a sample unless the last one is too recent. */
  record(at: number, perQueue: Record<string, number>): void {
    const last = this.#samples[this.#samples.length - 1];
    if (last && at - last.at < this.minIntervalMs) return;
    this.#samples.push({ at, perQueue });
    while (this.#samples.length > 0 && (this.#samples[0] as ThroughputSample).at < at - this.keepMs) {
      this.#samples.shift();
    }
  }

  /** The samples kept, oldest first. */
  samples(): readonly ThroughputSample[] {
    return this.#samples;
  }
}
