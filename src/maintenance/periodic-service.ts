import type pg from 'pg';

/**
 * What every maintenance service is built from: the same kind of input for all three (recovery,
 * retention, aging), plus each service's own settings and result callback.
 */
export interface MaintenanceServiceOptions {
  /** Mean interval between passes, in ms; each wait is jittered by ±25%. */
  intervalMs: number;
  /** The pool the passes run on. */
  db: pg.Pool;
  /** The (validated) schema maintained. */
  schema: string;
  /** Called when a pass fails; the service keeps going. */
  onError?: (err: unknown) => void;
}

/**
 * The skeleton every maintenance service shares: a `runOnce()` pass, repeated on a timer whose
 * every wait is jittered by ±25% so that many processes do not run in lockstep, with failures
 * reported and the timer kept going. `stop()` waits for a pass in progress.
 */
export abstract class PeriodicService<Result> {
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<Result | null> | null = null;
  #stopped = true;

  constructor(
    private readonly intervalMs: number,
    private readonly onPassError?: (err: unknown) => void,
  ) {}

  /** Runs one pass now. */
  abstract runOnce(): Promise<Result>;

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

  /**
   * Ends the timer from inside a pass, for a failure that no later pass can get past; `stop()`
   * still waits for the pass in progress.
   */
  protected retire(): void {
    this.#stopped = true;
  }

  /** How long to wait before the next pass: the interval, jittered by ±25%. */
  protected nextWaitMs(): number {
    return this.intervalMs * (0.75 + Math.random() * 0.5);
  }

  #scheduleNext(): void {
    if (this.#stopped) return;
    const wait = this.nextWaitMs();
    this.#timer = setTimeout(() => {
      this.#running = this.runOnce()
        .catch((err: unknown) => {
          this.onPassError?.(err);
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
