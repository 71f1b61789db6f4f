import type { Queryable } from '../storage/db.js';
import type { FenceRef } from '../storage/fence.js';
import { type CompleteRef, completeJobs } from '../storage/leases/complete.js';
import {
  type FailOutcome,
  type FailRef,
  failJobs,
  type SnoozeRef,
  snoozeJobs,
} from '../storage/leases/fail.js';
import { findLandedOutcomes } from '../storage/leases/outcome-lookup.js';
import type { FlushInfo } from './telemetry-events.js';
import type { OutcomeResult } from './worker-events.js';

/** The answer to one queued outcome write. */
export type { OutcomeResult } from './worker-events.js';

interface Pending<T> {
  ref: T;
  resolve: (result: OutcomeResult) => void;
  /**
   * Answered (resolved). Writes of one kind answered in a flush whose other kinds failed must not
   * be resent. A flag, not a WeakSet: one WeakSet entry per job was a measurable garbage-collection
   * cost of the hot path.
   */
  answered: boolean;
}

/**
 * Gathers completions, failures and snoozes from many concurrent jobs into one fenced statement
 * per kind and queue (a statement names its one queue, so that a layout split by queue answers it
 * from one part: docs/scaling.md; a worker's flush is usually of one queue). A flush starts on the next tick (or after `delayMs`) and the next one as soon as the
 * previous answers, so under load each statement carries everything that finished meanwhile.
 * A database error keeps the writes queued and retries with backoff: the fence makes a late
 * write harmless, and a job whose lease lapses meanwhile is recovered by the sweep. A write whose
 * statement failed may still have landed (the connection died after the commit, before the
 * answer): before it is sent again, one read finds out, so it is neither reported lost nor
 * written twice (see outcome-lookup.ts).
 */
export class OutcomeBatcher {
  #completes: Pending<CompleteRef>[] = [];
  #fails: Pending<FailRef>[] = [];
  #snoozes: Pending<SnoozeRef>[] = [];
  #scheduled = false;
  #flushing: Promise<void> | null = null;
  #failures = 0;
  #idle: (() => void)[] = [];
  #abandoned = false;
  // Writes sent in a flush that failed before they were answered: they may have landed.
  readonly #inDoubt = new Set<Pending<FenceRef>>();

  constructor(
    private readonly db: Queryable,
    private readonly schema: string,
    private readonly delayMs: number,
    private readonly onError: (err: unknown) => void,
    private readonly onFlushed: (info: FlushInfo) => void = () => {},
  ) {}

  /** Queues a completion (with the handler's result as JSON text, if any); resolves `completed` or `lost`. */
  complete(ref: CompleteRef): Promise<OutcomeResult> {
    return this.#queue(this.#completes, ref);
  }

  /** Queues a failure; resolves `retry`, `dead` or `lost`. */
  fail(ref: FailRef): Promise<OutcomeResult> {
    return this.#queue(this.#fails, ref);
  }

  /** Queues a snooze (also used to hand a lease back); resolves `snoozed` or `lost`. */
  snooze(ref: SnoozeRef): Promise<OutcomeResult> {
    return this.#queue(this.#snoozes, ref);
  }

  /** Number of writes waiting or in flight. */
  get size(): number {
    return this.#completes.length + this.#fails.length + this.#snoozes.length + (this.#flushing ? 1 : 0);
  }

  /** True once `abandon()` gave up on unanswered writes: this batcher sends nothing more. */
  get abandoned(): boolean {
    return this.#abandoned;
  }

  /** Resolves once every queued write has been answered. */
  drained(): Promise<void> {
    if (this.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /**
   * Gives up on every write not yet answered (the database is unreachable at shutdown): each
   * resolves as `lost` and none is retried. Their leases expire and the recovery sweep returns the
   * jobs, so nothing is lost, only run again. A flush already in flight may still land.
   */
  abandon(): void {
    this.#abandoned = true;
    this.#inDoubt.clear();
    for (const list of [this.#completes, this.#fails, this.#snoozes] as Pending<unknown>[][]) {
      for (const p of list.splice(0)) settle(p, 'lost');
    }
    for (const resolve of this.#idle.splice(0)) resolve();
  }

  #queue<T>(list: Pending<T>[], ref: T): Promise<OutcomeResult> {
    return new Promise((resolve) => {
      list.push({ ref, resolve, answered: false });
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#abandoned) {
      this.abandon();
      return;
    }
    if (this.#scheduled || this.#flushing) return;
    this.#scheduled = true;
    const start = () => {
      this.#scheduled = false;
      this.#flushing = this.#flush().finally(() => {
        this.#flushing = null;
        if (this.#completes.length + this.#fails.length + this.#snoozes.length > 0) this.#schedule();
        else for (const resolve of this.#idle.splice(0)) resolve();
      });
    };
    if (this.delayMs > 0) setTimeout(start, this.delayMs);
    else setImmediate(start);
  }

  async #flush(): Promise<void> {
    // One write per job in a flush: the statements (and the lookup of writes in doubt) answer by
    // job id, so a stale claim's write beside the live claim's write of the same job (the same
    // process claimed it again after its lease lapsed) would be told the live one's answer.
    const jobsInFlush = new Set<string>();
    let completes = takeOnePerJob(this.#completes, jobsInFlush);
    let fails = takeOnePerJob(this.#fails, jobsInFlush);
    let snoozes = takeOnePerJob(this.#snoozes, jobsInFlush);
    try {
      if (this.#inDoubt.size > 0) {
        await this.#settleLanded([...completes, ...fails, ...snoozes]);
        completes = completes.filter((p) => !p.answered);
        fails = fails.filter((p) => !p.answered);
        snoozes = snoozes.filter((p) => !p.answered);
      }
      await Promise.all([
        completes.length > 0 ? this.#flushCompletes(completes) : undefined,
        fails.length > 0 ? this.#flushFails(fails) : undefined,
        snoozes.length > 0 ? this.#flushSnoozes(snoozes) : undefined,
      ]);
      this.#failures = 0;
    } catch (err) {
      this.onError(err);
      // Whatever was not answered may have landed all the same.
      for (const p of [...completes, ...fails, ...snoozes] as Pending<FenceRef>[]) {
        if (!p.answered) this.#inDoubt.add(p);
      }
      // Put back what was not answered, then wait before trying again.
      this.#completes.unshift(...completes.filter((p) => !p.answered));
      this.#fails.unshift(...fails.filter((p) => !p.answered));
      this.#snoozes.unshift(...snoozes.filter((p) => !p.answered));
      this.#failures++;
      const wait = Math.random() * Math.min(5000, 50 * 2 ** this.#failures);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  // Settles the writes of a failed flush that did land; the others are sent again.
  async #settleLanded(batch: Pending<FenceRef>[]): Promise<void> {
    const doubtful = batch.filter((p) => this.#inDoubt.has(p));
    if (doubtful.length === 0) return;
    const landed = await findLandedOutcomes(
      this.db,
      this.schema,
      doubtful.map((p) => p.ref),
    );
    for (const p of doubtful) {
      this.#inDoubt.delete(p);
      const outcome = landed.get(p.ref.jobId);
      if (outcome) settle(p, outcome);
    }
  }

  async #flushCompletes(batch: Pending<CompleteRef>[]): Promise<void> {
    const sentAt = performance.now();
    const accepted = await completeJobs(
      this.db,
      this.schema,
      batch.map((p) => p.ref),
    );
    this.onFlushed({ operation: 'complete', jobs: batch.length, durationMs: performance.now() - sentAt });
    for (const p of batch) settle(p, accepted.has(p.ref.jobId) ? 'completed' : 'lost');
  }

  async #flushFails(batch: Pending<FailRef>[]): Promise<void> {
    const sentAt = performance.now();
    const outcomes = await failJobs(
      this.db,
      this.schema,
      batch.map((p) => p.ref),
    );
    this.onFlushed({ operation: 'fail', jobs: batch.length, durationMs: performance.now() - sentAt });
    for (const p of batch) settle(p, outcomes.get(p.ref.jobId) ?? ('lost' satisfies FailOutcome));
  }

  async #flushSnoozes(batch: Pending<SnoozeRef>[]): Promise<void> {
    const sentAt = performance.now();
    const accepted = await snoozeJobs(
      this.db,
      this.schema,
      batch.map((p) => p.ref),
    );
    this.onFlushed({ operation: 'snooze', jobs: batch.length, durationMs: performance.now() - sentAt });
    for (const p of batch) settle(p, accepted.has(p.ref.jobId) ? 'snoozed' : 'lost');
  }
}

/**
 * Takes from `queued` the writes whose job has none in `jobs` yet (adding theirs), and leaves the
 * others queued, in order, for the next flush.
 */
function takeOnePerJob<T extends FenceRef>(queued: Pending<T>[], jobs: Set<string>): Pending<T>[] {
  const taken = queued.splice(0);
  let kept = 0;
  for (const p of taken) {
    if (jobs.has(p.ref.jobId)) queued.push(p);
    else {
      jobs.add(p.ref.jobId);
      taken[kept++] = p;
    }
  }
  taken.length = kept;
  return taken;
}

function settle<T>(pending: Pending<T>, result: OutcomeResult): void {
  pending.answered = true;
  pending.resolve(result);
}
