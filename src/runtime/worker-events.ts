import type { EventEmitter } from 'node:events';
import type { OutstandingStatement } from '../connection/statement-watch.js';
import type { AgingResult } from '../maintenance/aging.js';
import type { LaneRotationResult } from '../maintenance/lane-rotation.js';
import type { RecoveryResult } from '../maintenance/recovery.js';
import type { PruneResult } from '../maintenance/retention.js';
import type { SchedulerResult } from '../maintenance/scheduler.js';
import type { AbortReason } from './run/job-context.js';
import type { LeaseLoss } from './run/lease-loss.js';
import type { ClaimInfo, FlushInfo, OutcomeDetail } from './telemetry-events.js';

/**
 * What a worker tells the outside: its events, counters and outcome types. The logger and the
 * metrics depend on this module, not on `Worker`, so the arrows between the runtime and
 * observability point one way.
 */

/**
 * The running job a worker event is about: what it is and where its run stands, read-only. (The
 * worker's own bookkeeping for the run stays inside the runtime.)
 */
export interface WorkerJob {
  readonly id: string;
  readonly queue: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly owner: string;
  /** When the run started, from `performance.now()`. */
  readonly startedAt: number;
  /** The handler has returned or thrown. */
  readonly settled: boolean;
}

/** How one job's run ended, as the database accepted it (`lost`: refused or never sent). */
export type OutcomeResult = 'completed' | 'retry' | 'dead' | 'snoozed' | 'lost';

/** Running totals of one worker since it started. */
export interface WorkerCounters {
  claimed: number;
  completed: number;
  retried: number;
  dead: number;
  snoozed: number;
  /** Outcomes the database refused (the lease was no longer current) or never sent (lease lapsed). */
  lost: number;
  /** Running jobs an operator's or API cancel stopped (their signal aborted with `CANCELLED`). */
  cancelled: number;
  /** Jobs whose handler ignored an aborted signal past the grace period. */
  stuck: number;
  /** Expired leases this worker's recovery sweep moved (from any worker). */
  recovered: number;
}

/** Events a worker emits. */
export interface WorkerEventMap {
  /** `start()` began claiming: the owner, every queue served and which of them are tasks. */
  started: [info: { owner: string; queues: readonly string[]; tasks: readonly string[] }];
  /** A job's outcome was accepted. */
  outcome: [job: WorkerJob, result: OutcomeResult, detail: OutcomeDetail];
  /** A claim statement answered (for metrics: its duration, and how long each job had waited). */
  claimed: [queue: string, info: ClaimInfo];
  /** A batched outcome statement answered (for metrics: its duration). */
  flushed: [info: FlushInfo];
  /** A job's signal was aborted (cancelled while running, lease lost or lapsing, maximum runtime, shutdown). */
  aborted: [job: WorkerJob, reason: AbortReason];
  /** A handler kept running after its signal was aborted; its slot stays taken until it returns. */
  stuck: [job: WorkerJob];
  /**
   * A run lost its lease (or passed its maximum runtime): once per run, with a message naming the
   * job and what to change. Without a listener or a `logger`, it goes to `process.emitWarning`.
   */
  leaseLost: [job: WorkerJob, loss: LeaseLoss];
  /** The recovery sweep moved expired leases. */
  recovered: [result: RecoveryResult];
  /** A fairness pass raised long-waiting jobs' priority or repaired ordering keys. */
  aged: [result: AgingResult];
  /** A retention pass removed finished or expired-retention jobs. */
  pruned: [result: PruneResult];
  /** A scheduler pass enqueued jobs for due cron ticks (one per tick). */
  scheduled: [result: SchedulerResult];
  /** A lane rotation pass moved rows out of a hot lane or truncated drained lanes (docs/storage.md). */
  rotated: [result: LaneRotationResult];
  /** An internal error (database unavailable, listener dropped); the worker retries by itself. */
  error: [err: unknown];
  /**
   * A statement has waited for its answer longer than the shortest lease of this worker (a dead
   * connection, a paused server, a commit waiting for a lost synchronous standby): once per episode.
   */
  stalled: [statement: OutstandingStatement];
}

/** What observers (logger, metrics) see of a worker: its events and a few gauges. */
export interface WorkerEventSource extends EventEmitter<WorkerEventMap> {
  /** The worker's lease owner name. */
  readonly owner: string;
  /** Handler slots in all. */
  readonly slots: number;
  /** Jobs running now. */
  readonly activeCount: number;
}

/** A fresh set of counters, all zero. */
export function zeroCounters(): WorkerCounters {
  return {
    claimed: 0,
    completed: 0,
    retried: 0,
    dead: 0,
    snoozed: 0,
    lost: 0,
    cancelled: 0,
    stuck: 0,
    recovered: 0,
  };
}

/** Adds one accepted (or lost) outcome to a worker's running totals. */
export function countOutcome(counters: WorkerCounters, result: OutcomeResult): void {
  switch (result) {
    case 'completed':
      counters.completed++;
      break;
    case 'retry':
      counters.retried++;
      break;
    case 'dead':
      counters.dead++;
      break;
    case 'snoozed':
      counters.snoozed++;
      break;
    case 'lost':
      counters.lost++;
      break;
  }
}
