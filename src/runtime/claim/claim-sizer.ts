/** How a ClaimSizer turns the observed rate and the lease into a read-ahead. */
export interface ClaimSizerSettings {
  /**
   * Share of the lease that the unstarted (read-ahead) jobs may take to start at the observed rate.
   * A quarter: a buffered job is handed back unstarted once it waited half its lease, so the bound
   * keeps every buffered job well within that.
   */
  leaseFraction: number;
  /** Largest read-ahead whatever the rate: more buys no throughput and holds more leases. */
  maxReadAhead: number;
  /** The rate is counted over this many ms of recent handler completions. */
  rateSpanMs: number;
}

/** A quarter of the lease; at most 1,000 jobs ahead; the rate of the last 2 seconds. */
export const CLAIM_SIZER_DEFAULTS: ClaimSizerSettings = {
  leaseFraction: 0.25,
  maxReadAhead: 1000,
  rateSpanMs: 2000,
};

const BUCKETS = 8;

/**
 * The read-ahead of one queue in a worker when the user set no `prefetch`: how many claimed jobs
 * may wait in the local buffer beyond the handler slots.
 *
 * The bound is the seed's rule, never hold more unstarted work than can be finished within the
 * lease: read-ahead <= observed completion rate × lease × `leaseFraction`. The rate is the number
 * of handlers that settled over the last `rateSpanMs` divided by that span (never by less: a burst
 * at start-up cannot pass for a rate), so it falls to zero when the queue idles or its handlers
 * stop returning, and so does the bound.
 *
 * Within the bound the read-ahead grows like TCP slow start: it starts at 0 (claims only for free
 * slots, as without read-ahead), and each claim made after the buffer ran dry under a backlog, or
 * while it could not cover the handler slots, doubles it, from `concurrency` up, to at most `maxReadAhead`.
 * A buffered job that waited longer than the bound intends (a quarter of its lease) halves it.
 * Every read of `readAhead()` clamps it to the current bound. Costs O(1) per job (one counter).
 */
export class ClaimSizer {
  readonly #bucketMs: number;
  readonly #counts = new Array<number>(BUCKETS).fill(0);
  #bucketIndex = 0; // absolute index (time / bucketMs) of the newest bucket
  #readAhead = 0;
  #starved = false;

  constructor(
    private readonly leaseMs: number,
    private readonly concurrency: number,
    private readonly settings: ClaimSizerSettings = CLAIM_SIZER_DEFAULTS,
    now: number = performance.now(),
  ) {
    this.#bucketMs = settings.rateSpanMs / BUCKETS;
    this.#bucketIndex = Math.floor(now / this.#bucketMs);
  }

  /** A handler settled (returned or threw): counts towards the rate. */
  settled(now: number = performance.now()): void {
    this.#advance(now);
    const slot = this.#bucketIndex % BUCKETS;
    this.#counts[slot] = (this.#counts[slot] ?? 0) + 1;
  }

  /** Handler completions per second over the last `rateSpanMs`. */
  rate(now: number = performance.now()): number {
    this.#advance(now);
    let sum = 0;
    for (const count of this.#counts) sum += count;
    return (sum * 1000) / this.settings.rateSpanMs;
  }

  /** The most unstarted jobs this queue may hold now: rate × lease × leaseFraction, rounded down. */
  bound(now: number = performance.now()): number {
    return Math.floor(((this.rate(now) * this.leaseMs) / 1000) * this.settings.leaseFraction);
  }

  /** The read-ahead allowed now (0 .. maxReadAhead), never above `bound()`. */
  readAhead(now: number = performance.now()): number {
    this.#readAhead = Math.min(this.#readAhead, this.bound(now));
    return this.#readAhead;
  }

  /** A handler slot was free with nothing buffered while the queue still had work: the read-ahead ran dry. */
  starved(): void {
    this.#starved = true;
  }

  /**
   * A claim is about to be sent while `buffered` jobs wait: if they cannot cover the handler slots,
   * or the buffer ran dry since the last claim, the read-ahead was too small for this rate, and
   * doubles (within the bound).
   */
  claiming(buffered: number, now: number = performance.now()): void {
    const starved = this.#starved;
    this.#starved = false;
    if (!starved && buffered >= this.concurrency) return;
    const grown = Math.max(this.concurrency, this.#readAhead * 2);
    this.#readAhead = Math.min(grown, this.settings.maxReadAhead, this.bound(now));
  }

  /** A buffered job waited `waitedMs` before it started: past leaseFraction of the lease halves the read-ahead. */
  started(waitedMs: number): void {
    if (waitedMs > this.leaseMs * this.settings.leaseFraction)
      this.#readAhead = Math.floor(this.#readAhead / 2);
  }

  // Empties the buckets that fell out of the span since the last call.
  #advance(now: number): void {
    const index = Math.floor(now / this.#bucketMs);
    const steps = Math.min(index - this.#bucketIndex, BUCKETS);
    for (let i = 1; i <= steps; i++) this.#counts[(this.#bucketIndex + i) % BUCKETS] = 0;
    if (index > this.#bucketIndex) this.#bucketIndex = index;
  }
}
