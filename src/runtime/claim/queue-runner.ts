import type { ClaimedRow } from '../../storage/leases/claim.js';
import type { ResolvedQueue } from '../options.js';
import type { OutcomeResult } from '../outcome-batcher.js';
import type { Throttle } from './claim-router.js';
import { ClaimSizer } from './claim-sizer.js';
import type { SlotPool } from './slot-pool.js';

/** What a queue runner needs from the worker that owns it. */
export interface QueueRunnerHost {
  /** True while the worker accepts new work. */
  readonly accepting: boolean;
  /** Largest claim batch. */
  readonly claimBatchSize: number;
  /** Claims up to `limit` jobs of the runner's queue; `sizing` is reported with the claim. */
  claim(config: ResolvedQueue, limit: number, sizing: ClaimSizing): Promise<ClaimedRow[]>;
  /** True when the queue's last claim came back short from a floor: claim again (from the front) now. */
  frontClaimDue(queue: string): boolean;
  /** The queue's last claim was held back by its rate or concurrency limit: for how long, and by which. */
  throttled?(queue: string): Throttle | null;
  /** Starts a handler for a claimed job; the runner's accounting is already updated. */
  start(runner: QueueRunner, row: ClaimedRow, claimSentAt: number): void;
  /** Returns a claimed job that never started: pending again at once, attempt refunded. */
  handBack(config: ResolvedQueue, row: ClaimedRow): Promise<OutcomeResult>;
  /** Reports an internal error; the runner retries by itself. */
  reportError(err: unknown): void;
  /** The runner may have gone quiet (its claim loop ended, or an outcome write was answered). */
  settled?(): void;
}

/** The read-ahead a claim was sized with (see ClaimInfo). */
export interface ClaimSizing {
  readAhead: number;
  readAheadBound: number | null;
}

interface Buffered {
  row: ClaimedRow;
  claimSentAt: number;
}

/**
 * The claim loop and slot accounting of one queue inside a worker. Claims never exceed the free
 * slots (plus the prefetch allowance), a slot is free once its last outcome write is answered, and
 * slots freed together are claimed for together, in one statement. With a shared `SlotPool`
 * (weighted queues), a claim also stays within the queue's current share of the pool.
 */
export class QueueRunner {
  /** Handlers running now. */
  active = 0;
  /** Jobs whose handler settled but whose outcome write is not answered yet. */
  awaiting = 0;
  /** More work may be claimable: claim when a slot is free. */
  wanted = false;
  /** Claimed jobs waiting for a free slot (only with `prefetch`); their leases are already running. */
  readonly buffer: Buffered[] = [];
  /**
   * The adaptive read-ahead when the user set no `prefetch`; null with a fixed prefetch, and in a
   * shared SlotPool, whose slots already bound what each queue holds.
   */
  readonly sizer: ClaimSizer | null;
  #pump: Promise<void> | null = null;
  #pumpScheduled = false;
  #claimFailures = 0;
  /** While the queue's limit holds claims back: which limit (a timer ends it). */
  #throttledBy: Throttle['by'] | null = null;
  #throttleTimer: NodeJS.Timeout | null = null;

  constructor(
    readonly config: ResolvedQueue,
    private readonly host: QueueRunnerHost,
    private readonly pool: SlotPool | null,
  ) {
    this.sizer =
      config.prefetch === null && pool === null ? new ClaimSizer(config.leaseMs, config.concurrency) : null;
    pool?.register(this);
  }

  /** Jobs this queue may claim ahead of its free slots now: the fixed `prefetch`, or the adaptive one. */
  get prefetch(): number {
    return this.config.prefetch ?? this.sizer?.readAhead() ?? 0;
  }

  /** Slots this queue holds against a shared pool: running, awaiting an answer, or buffered. */
  get held(): number {
    return this.active + this.awaiting + this.buffer.length;
  }

  /** Nothing claiming, running, buffered or awaiting an answer: the queue's part of an idle run is done for now. */
  get quiet(): boolean {
    return !this.#pump && !this.#pumpScheduled && this.held === 0;
  }

  /** The claim in flight, if any (awaited at shutdown). */
  get pump(): Promise<void> | null {
    return this.#pump;
  }

  /**
   * Marks the queue as possibly having work, and claims when there is room: as soon as the code
   * that woke it returns (a microtask), not on the event loop's next turn. A wake-up (a
   * notification, a poll) frees no slot, so there is nothing to gather first, and an idle worker's
   * wake-up is the latency from enqueue to handler start: waiting for the turn cost a notified
   * claim about 0.1 ms on a 2-core host. Notifications parsed from one read of the socket still
   * make one claim: the first schedules it, the others find it scheduled.
   */
  wake(): void {
    if (!this.host.accepting) return;
    this.wanted = true;
    this.schedulePump(queueMicrotask);
  }

  /**
   * Deferred by default to the next turn, so that slots freed together (one outcome batch
   * answering many jobs) are claimed for together, in one statement.
   */
  schedulePump(defer: (run: () => void) => void = setImmediate): void {
    if (this.#pumpScheduled || this.#pump) return;
    // Throttled: the timer set from the claim's answer claims again; wake-ups only mark `wanted`.
    if (this.#throttledBy !== null) return;
    this.#pumpScheduled = true;
    defer(() => {
      this.#pumpScheduled = false;
      if (!this.#pump)
        this.#pump = this.#run().finally(() => {
          this.#pump = null;
          this.host.settled?.();
        });
    });
  }

  /** Removes and returns the buffered jobs (to hand back at shutdown). */
  drainBuffer(): ClaimedRow[] {
    return this.buffer.splice(0).map((buffered) => buffered.row);
  }

  /** A handler is starting for a claimed job. */
  jobStarted(): void {
    this.active++;
  }

  /** A handler returned or threw; its outcome write is now in flight. */
  handlerSettled(): void {
    this.sizer?.settled();
    this.active--;
    this.awaiting++;
    this.#afterSlotChange();
  }

  /** A job's outcome write was answered: its slot is free. */
  outcomeAnswered(): void {
    this.awaiting--;
    this.#afterSlotChange();
    this.host.settled?.();
  }

  #afterSlotChange(): void {
    // One of this queue's jobs ended: a concurrency slot is free now, whatever the last claim said.
    if (this.#throttledBy === 'concurrency') this.#endThrottle();
    this.startBuffered();
    if (this.wanted && this.claimRoom() > 0) this.schedulePump();
    // A slot freed in a shared pool may be another queue's turn.
    this.pool?.slotFreed(this);
  }

  async #run(): Promise<void> {
    while (this.host.accepting && this.wanted) {
      this.sizer?.claiming(this.buffer.length);
      const room = this.claimRoom();
      if (room <= 0) return; // a freed slot or an answered write schedules the next claim
      this.wanted = false;
      const limit = Math.min(room, this.host.claimBatchSize);
      const sentAt = performance.now();
      let rows: ClaimedRow[];
      this.pool?.reserve(this, limit);
      try {
        rows = await this.host.claim(this.config, limit, {
          readAhead: this.prefetch,
          readAheadBound: this.sizer?.bound() ?? null,
        });
        this.#claimFailures = 0;
      } catch (err) {
        this.pool?.release(this, limit);
        this.host.reportError(err);
        this.#claimFailures++;
        this.wanted = true;
        await sleep(Math.random() * Math.min(5000, 100 * 2 ** this.#claimFailures));
        continue;
      }
      for (const row of rows) this.buffer.push({ row, claimSentAt: sentAt });
      this.pool?.release(this, limit);
      this.startBuffered();
      const throttle = this.host.throttled?.(this.config.name) ?? null;
      if (throttle !== null) {
        // The limit held the claim back: more is claimable, but not before capacity is free.
        this.wanted = true;
        this.#throttle(throttle);
        this.pool?.slotFreed(this);
        return;
      }
      // A full batch suggests more is waiting; a short one means the queue is drained for now,
      // unless the claim started at a floor and jobs may wait below it (see claim-floor.ts).
      if (rows.length === limit || (rows.length > 0 && this.host.frontClaimDue(this.config.name)))
        this.wanted = true;
      else this.pool?.slotFreed(this);
    }
  }

  /** True while the queue's limit holds its claims back (they resume by themselves). */
  get throttled(): boolean {
    return this.#throttledBy !== null;
  }

  // Sleeps until the limit has capacity again (the claim said when, in database time), then claims.
  #throttle(throttle: Throttle): void {
    if (this.#throttleTimer) clearTimeout(this.#throttleTimer);
    this.#throttledBy = throttle.by;
    this.#throttleTimer = setTimeout(() => this.#endThrottle(), Math.max(1, Math.ceil(throttle.waitMs)));
    this.#throttleTimer.unref();
  }

  #endThrottle(): void {
    if (this.#throttleTimer) clearTimeout(this.#throttleTimer);
    this.#throttleTimer = null;
    this.#throttledBy = null;
    if (this.wanted) this.schedulePump();
  }

  /**
   * How many jobs to claim now (`prefetch` is the fixed or the adaptive one). Without prefetch, only for free slots, and a slot is free only once
   * its last outcome write was answered. With prefetch, the running and buffered jobs stay within
   * concurrency + prefetch, and writes in flight may add as many again: so the next claim overlaps
   * the previous batch's completion instead of waiting for it. Claims wait until a quarter of the
   * allowance is free, so they stay large. A shared pool caps the result by this queue's share.
   */
  claimRoom(): number {
    const { concurrency } = this.config;
    const prefetch = this.prefetch;
    let room: number;
    if (prefetch === 0) room = concurrency - this.active - this.awaiting;
    else {
      const allowance = concurrency + prefetch;
      if (this.awaiting > allowance) return 0;
      room = allowance - this.active - this.buffer.length;
      if (room < allowance / 4) return 0;
    }
    return this.pool ? Math.min(room, this.pool.roomFor(this)) : room;
  }

  /**
   * Starts buffered jobs while handler slots are free. Without prefetch, a slot is free only once
   * its previous job's outcome write was answered; with it, unanswered writes count against the
   * prefetch allowance instead. A job that waited so long that less than half of its lease is left
   * is handed back rather than started on borrowed time.
   */
  startBuffered(): void {
    const { config } = this;
    let started = 0;
    if (!this.host.accepting) return;
    const slotsHeldUntilAnswered = this.prefetch === 0;
    while (
      this.active + (slotsHeldUntilAnswered ? this.awaiting : 0) < config.concurrency &&
      started < this.buffer.length
    ) {
      const next = this.buffer[started++] as Buffered;
      const waitedMs = performance.now() - next.claimSentAt;
      this.sizer?.started(waitedMs);
      if (waitedMs > config.leaseMs / 2) {
        void this.host.handBack(config, next.row);
      } else {
        this.jobStarted();
        this.host.start(this, next.row, next.claimSentAt);
      }
    }
    if (started > 0) this.buffer.splice(0, started);
    // A free slot, nothing buffered, and more work expected: the read-ahead was too small.
    if (
      this.sizer &&
      this.buffer.length === 0 &&
      this.active < config.concurrency &&
      (this.wanted || this.#pump)
    )
      this.sizer.starved();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
