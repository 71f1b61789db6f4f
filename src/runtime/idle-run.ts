import { type RecoveryResult, recoveryPass, SWEEP_BATCHES } from '../maintenance/recovery.js';
import { ValidationError } from '../shared/errors.js';
import { rejectUnknownOptions } from '../shared/unknown-options.js';
import { optionalInt } from '../shared/validation.js';
import type { Queryable } from '../storage/db.js';
import type { WorkerCounters } from './worker-events.js';

/** Bounds of `worker.runUntilIdle()` (and of `lh.runUntilIdle()`). */
export interface IdleRunLimits {
  /**
   * Stop claiming after this many ms (default: no bound). Jobs claimed but not started are handed
   * back at once; running handlers get the worker's `shutdownTimeoutMs` to finish, then are
   * aborted and handed back, as at `stop()`.
   */
  maxMs?: number;
  /** Claim (and so run) at most this many jobs in this run (default: no bound). */
  maxJobs?: number;
}

/** Why an idle run ended. */
export type IdleRunEnd = 'idle' | 'maxJobs' | 'maxMs' | 'stopped';

/**
 * What one idle run did, counted from the database's answers to its writes (a run counts once, by
 * the outcome its lease allowed).
 */
export interface IdleRunResult {
  /** Runs whose completion the database accepted. */
  succeeded: number;
  /** Runs that failed and were recorded as such: retry scheduled (`failed - dead`) or dead. */
  failed: number;
  /** Of `failed`, the runs that left their job dead (attempts spent, or a permanent error). */
  dead: number;
  /** Runs that snoozed (`SnoozeError`): pending again later, no attempt spent. */
  snoozed: number;
  /**
   * Runs whose outcome changed nothing: refused by the fence (the lease was no longer theirs), or
   * never sent because the lease had lapsed. Their jobs are the recovery sweep's, never lost.
   */
  lost: number;
  /** Expired leases (of any worker, any queue) the run's first recovery pass moved. */
  recovered: number;
  /**
   * `idle`: nothing of its queues was claimable any more (database time); `maxJobs` or `maxMs`: a
   * bound was hit (more may be claimable); `stopped`: `stop()` was called during the run.
   */
  endedBy: IdleRunEnd;
}

/** Largest `maxMs` of an idle run: one week. */
const MAX_IDLE_RUN_MS = 7 * 86_400_000;

/** Validates idle-run bounds; `maxJobs` is Infinity when unbounded, `maxMs` null. */
export function resolveIdleRunLimits(given: IdleRunLimits | undefined): {
  maxMs: number | null;
  maxJobs: number;
} {
  if (given !== undefined && (typeof given !== 'object' || given === null))
    throw new ValidationError('options', 'must be an object like { maxMs, maxJobs }');
  const limits = given ?? {};
  rejectUnknownOptions(limits, ['maxMs', 'maxJobs'], 'options');
  return {
    maxMs: limits.maxMs === undefined ? null : optionalInt(limits.maxMs, 'maxMs', 1, MAX_IDLE_RUN_MS, 1),
    maxJobs:
      limits.maxJobs === undefined
        ? Number.POSITIVE_INFINITY
        : optionalInt(limits.maxJobs, 'maxJobs', 1, Number.MAX_SAFE_INTEGER, 1),
  };
}

/** What an idle run needs of its worker. */
export interface IdleRunHost {
  /** True when no queue is claiming, running, buffering or awaiting an outcome write. */
  quiet(): boolean;
  /** Asks every queue to claim now. */
  wakeAll(): void;
}

/**
 * Decides when a worker's idle run ends. The worker's own claim loops do the work; this counts
 * what they may still claim (`maxJobs`) and, whenever every queue has gone quiet, asks them all to
 * claim once more: if that round finds nothing, nothing is claimable now (the claim statement
 * decides in database time), so the run is idle. A job enqueued by a handler, or a retry due
 * already, is found by that round and run; one whose backoff lies in the future is not waited for.
 */
export class IdleRun {
  /** Resolves with the reason once the run should end (the worker then stops as at `stop()`). */
  readonly ended: Promise<IdleRunEnd>;
  #end!: (reason: IdleRunEnd) => void;
  #over = false;
  #remaining: number;
  #woken = false;
  #claimedSinceWake = 0;
  #handBacks = 0;
  #timer: NodeJS.Timeout | null = null;
  #reason: IdleRunEnd = 'stopped';
  #recovered = 0;
  readonly #before: WorkerCounters;

  /** `counters`: the worker's running totals, which this run's result is counted from. */
  constructor(
    limits: { maxMs: number | null; maxJobs: number },
    private readonly counters: WorkerCounters,
    private readonly host: IdleRunHost,
  ) {
    this.#before = { ...counters };
    this.#remaining = limits.maxJobs;
    this.ended = new Promise((resolve) => {
      this.#end = resolve;
    });
    if (limits.maxMs !== null) this.#timer = setTimeout(() => this.end('maxMs'), limits.maxMs);
  }

  /** How many of `limit` jobs a claim may still take in this run (0: claim nothing). */
  claimLimit(limit: number): number {
    return this.#over ? 0 : Math.min(limit, this.#remaining);
  }

  /** A claim took `rows` jobs. */
  claimed(rows: number): void {
    this.#remaining -= rows;
    this.#claimedSinceWake += rows;
  }

  /**
   * A hand-back in flight (a buffered job that waited past half its lease): the run is not idle
   * before it is answered, since the job is claimable again only then.
   */
  handingBack<T>(write: Promise<T>): Promise<T> {
    this.#handBacks++;
    return write.finally(() => {
      this.#handBacks--;
      this.check();
    });
  }

  /** Ends the run (once) for `reason`. */
  end(reason: IdleRunEnd): void {
    if (this.#over) return;
    this.#over = true;
    this.#reason = reason;
    if (this.#timer) clearTimeout(this.#timer);
    this.#end(reason);
  }

  /**
   * The recovery pass the run starts with: the worker's sweep (same statement, same batches), but
   * the leases it returns are claimable at once (no backoff): this run claims them next, and a
   * backoff would only let it go idle before they were due. Counted in the worker's `recovered`.
   */
  async recover(db: Queryable, schema: string): Promise<RecoveryResult> {
    const { maxDelayMs: _due, ...moved } = await recoveryPass(db, schema, {
      backoff: { baseMs: 0, maxMs: 0 },
      batchSize: SWEEP_BATCHES.first,
      largestBatch: SWEEP_BATCHES.largest,
    });
    this.#recovered += moved.retried + moved.dead;
    this.counters.recovered += moved.retried + moved.dead;
    return moved;
  }

  /** What the run did: the worker's counters since the run began, and why it ended. */
  result(after: WorkerCounters): IdleRunResult {
    const before = this.#before;
    const dead = after.dead - before.dead;
    return {
      succeeded: after.completed - before.completed,
      failed: after.retried - before.retried + dead,
      dead,
      snoozed: after.snoozed - before.snoozed,
      lost: after.lost - before.lost,
      recovered: this.#recovered,
      endedBy: this.#reason,
    };
  }

  /** Called whenever a queue may have gone quiet: ends the run, or starts the confirming claim round. */
  check(): void {
    if (this.#over || this.#handBacks > 0 || !this.host.quiet()) return;
    if (this.#remaining <= 0) this.end('maxJobs');
    else if (this.#woken && this.#claimedSinceWake === 0) this.end('idle');
    else {
      this.#woken = true;
      this.#claimedSinceWake = 0;
      this.host.wakeAll();
    }
  }
}
