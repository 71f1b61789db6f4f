/** What one recovery pass moved. */
export interface RecoveryResult {
  /** Expired leases returned to `pending`. */
  retried: number;
  /** Expired leases whose attempts were spent, now `dead`. */
  dead: number;
}

/** Options of the recovery service. */
export interface RecoveryServiceOptions {
  /** Mean interval between passes, in ms; each wait is jittered by ±25%. */
  intervalMs: number;
  /** One pass: recover expired leases in bounded batches. */
  recover: () => Promise<RecoveryResult>;
  /** Called after a pass that moved something. */
  onRecovered?: (result: RecoveryResult) => void;
  /** Called when a pass fails; the service keeps going. */
  onError?: (err: unknown) => void;
}

/**
 * Runs the expired-lease recovery sweep on a jittered timer. Every worker process runs one:
 * the sweep's statement takes rows with SKIP LOCKED and re-checks expiry, so concurrent sweeps
 * neither collide nor touch renewed or completed jobs, and no leader is needed. The jitter keeps
 * many processes from sweeping in lockstep.
 */
export class RecoveryService {
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<RecoveryResult | null> | null = null;
  #stopped = true;

  constructor(private readonly options: RecoveryServiceOptions) {}

  /** Runs one pass now. */
  async runOnce(): Promise<RecoveryResult> {
    const result = await this.options.recover();
    if (result.retried + result.dead > 0) this.options.onRecovered?.(result);
    return result;
  }

  /** Starts the timer. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#scheduleNext();
  }

  /** Stops the timer and waits for a pass in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  #scheduleNext(): void {
    if (this.#stopped) return;
    const wait = this.options.intervalMs * (0.75 + Math.random() * 0.5);
    this.#timer = setTimeout(() => {
      this.#running = this.runOnce()
        .catch((err: unknown) => {
          this.options.onError?.(err);
          return null;
        })
        .finally(() => {
          this.#running = null;
          this.#scheduleNext();
        });
    }, wait);
    this.#timer.unref();
  }
}
