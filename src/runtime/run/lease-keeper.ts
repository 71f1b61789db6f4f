import type { Queryable } from '../../storage/db.js';
import { leaseKey } from '../../storage/fence.js';
import { cancelledClaims } from '../../storage/leases/cancelled-claims.js';
import { extendLeases } from '../../storage/leases/heartbeat.js';
import type { ResolvedQueue } from '../options.js';
import type { AbortReason, ActiveJob } from './job-context.js';

/** A job with a progress detail to store is renewed at most this often on its account. */
const PROGRESS_SPACING_MS = 1000;

/** Events the keeper reports to the worker. */
export interface LeaseKeeperEvents {
  /** A job's signal was aborted (cancelled, lease lost, about to lapse, or past its maximum runtime). */
  aborted(job: ActiveJob, reason: AbortReason): void;
  /** A job was aborted but its handler has not returned after a grace period. */
  stuck(job: ActiveJob): void;
  /** An extension round failed at the database. */
  error(err: unknown): void;
}

/**
 * Keeps the leases of one worker's running jobs, on a single timer (never one per job).
 * Each tick: abort jobs whose lease is about to lapse or whose run passed its maximum; extend,
 * in one fenced statement, the leases that are due and have earned it (`progress` since the last
 * extension, or merely running under `renew: 'alive'`); report handlers that ignore their signal.
 * A progress detail travels with its job's next extension, which it makes due within
 * PROGRESS_SPACING_MS (or a third of the lease, if shorter), so it shows within about a second
 * without a statement of its own; only the latest detail since the last extension is sent.
 * The local deadline is measured on a monotonic clock from when the claim or extension was sent,
 * minus a margin, so it always falls before the database's own expiry.
 */
export class LeaseKeeper {
  // Keyed by run, not job id: a job reclaimed by this same worker while its earlier, fenced-out run
  // still hangs has two runs here, and the earlier one must still be aborted at its deadline.
  // The value is the run's queue options, not a wrapper object: one object less per job.
  readonly #jobs = new Map<ActiveJob, ResolvedQueue>();
  readonly #tickMs: number;
  #timer: NodeJS.Timeout | null = null;
  #renewing = false;
  // When the last tick ran, and how late it was: a late tick means a blocked event loop.
  #lastTickAt = 0;
  #lastTickLateMs = 0;

  constructor(
    private readonly db: Queryable,
    private readonly schema: string,
    queues: readonly ResolvedQueue[],
    private readonly events: LeaseKeeperEvents,
  ) {
    const shortestLease = Math.min(...queues.map((q) => q.leaseMs));
    this.#tickMs = Math.max(10, Math.min(500, Math.floor(shortestLease / 10)));
  }

  /** Safety margin between the local deadline and the database expiry for a lease length. */
  marginFor(leaseMs: number): number {
    return Math.min(5000, Math.max(leaseMs * 0.2, 2 * this.#tickMs));
  }

  /** Starts watching a job. */
  track(job: ActiveJob, queue: ResolvedQueue): void {
    this.#jobs.set(job, queue);
    if (!this.#timer) {
      this.#lastTickAt = performance.now();
      this.#lastTickLateMs = 0;
      this.#timer = setInterval(() => this.#tick(), this.#tickMs);
      this.#timer.unref();
    }
  }

  /** Stops watching a job (its handler settled and its outcome is recorded). */
  untrack(job: ActiveJob): void {
    this.#jobs.delete(job);
    if (this.#jobs.size === 0) this.stop();
  }

  /** Stops the timer. */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  /**
   * How late the keeper's timer is running, in ms: the lateness of its last tick, or how overdue
   * the next one is, whichever is larger. A large value means the event loop was blocked.
   */
  timerLateMs(): number {
    if (!this.#timer) return 0;
    const overdue = performance.now() - this.#lastTickAt - this.#tickMs;
    return Math.max(0, this.#lastTickLateMs, overdue);
  }

  #tick(): void {
    const now = performance.now();
    this.#lastTickLateMs = Math.max(0, now - this.#lastTickAt - this.#tickMs);
    this.#lastTickAt = now;
    const due: { job: ActiveJob; queue: ResolvedQueue }[] = [];
    // forEach, not for-of over entries: no [job, queue] array per tracked job per tick.
    this.#jobs.forEach((queue, job) => {
      if (job.abortReason !== null) {
        if (!job.settled && !job.stuckReported && now - job.deadline > queue.leaseMs) {
          job.stuckReported = true;
          this.events.stuck(job);
        }
        return;
      }
      if (now >= job.runtimeLimitAt) {
        this.#abort(job, 'max-runtime');
      } else if (now >= job.deadline) {
        this.#abort(job, 'lease-deadline');
      } else if (!job.renewing && !job.settled && !job.completing) {
        const sinceRenewal = now - job.lastRenewalSentAt;
        if (
          (sinceRenewal >= queue.leaseMs / 3 &&
            (queue.renew === 'alive' || job.progressed || job.transacting)) ||
          (job.progressDetail !== null && sinceRenewal >= Math.min(PROGRESS_SPACING_MS, queue.leaseMs / 3))
        ) {
          due.push({ job, queue });
        }
      }
    });
    if (due.length > 0 && !this.#renewing) void this.#renew(due);
  }

  async #renew(due: { job: ActiveJob; queue: ResolvedQueue }[]): Promise<void> {
    this.#renewing = true;
    const sentAt = performance.now();
    const earned = due.map(({ job }) => job.progressed);
    const details = due.map(({ job }) => job.progressDetail);
    for (const { job } of due) {
      job.renewing = true;
      job.progressed = false;
      job.progressDetail = null;
    }
    try {
      const extended = await extendLeases(
        this.db,
        this.schema,
        due.map(({ job, queue }, i) => ({ ...job.lease, leaseMs: queue.leaseMs, progress: details[i] })),
      );
      const refused: ActiveJob[] = [];
      for (const { job, queue } of due) {
        const expiresAt = extended.get(leaseKey(job.lease));
        if (expiresAt) {
          job.lease.expiresAt = expiresAt;
          job.lastRenewalSentAt = sentAt;
          job.deadline = sentAt + queue.leaseMs - this.marginFor(queue.leaseMs);
        } else {
          refused.push(job);
        }
      }
      if (refused.length > 0) await this.#abortRefused(refused);
    } catch (err) {
      // The old deadlines still stand: if extensions keep failing, the jobs are aborted in time.
      due.forEach(({ job }, i) => {
        job.progressed ||= earned[i] ?? false;
        job.progressDetail ??= details[i] ?? null; // unless a newer one came meanwhile
      });
      this.events.error(err);
    } finally {
      for (const { job } of due) job.renewing = false;
      this.#renewing = false;
    }
  }

  /**
   * Aborts the runs whose extension was refused: `cancelled` for a claim a cancel ended (one read,
   * only now that the fence refused), else `lease-lost` (also when that read fails).
   */
  async #abortRefused(refused: ActiveJob[]): Promise<void> {
    const cancelled = await cancelledClaims(
      this.db,
      this.schema,
      refused.map((job) => job.lease),
    ).catch(() => new Set<string>());
    for (const job of refused)
      this.#abort(job, cancelled.has(leaseKey(job.lease)) ? 'cancelled' : 'lease-lost');
  }

  #abort(job: ActiveJob, reason: AbortReason): void {
    job.abort(reason);
    this.events.aborted(job, reason);
  }
}
