import { type AgingResult, AgingService } from '../maintenance/aging.js';
import { type LaneRotationResult, LaneRotationService } from '../maintenance/lane-rotation.js';
import { type RecoveryResult, RecoveryService, SWEEP_BATCHES } from '../maintenance/recovery.js';
import { type PruneResult, RetentionService } from '../maintenance/retention.js';
import { type SchedulerResult, SchedulerService } from '../maintenance/scheduler.js';
import type { ResolvedWorkerOptions } from './options.js';
import type { WorkerContext } from './worker-context.js';

/** What the worker does with the maintenance services' results. */
export interface MaintenanceHooks {
  /** A pass moved leases; `dueInMs`: when the last job it returned to pending becomes claimable. */
  recovered(result: RecoveryResult, dueInMs: number): void;
  pruned(result: PruneResult): void;
  aged(result: AgingResult): void;
  /** A scheduler pass enqueued jobs for due cron ticks. */
  scheduled(result: SchedulerResult): void;
  /** A lane rotation pass moved rows or truncated lanes. */
  rotated(result: LaneRotationResult): void;
  error(err: unknown): void;
}

/**
 * The background services every worker runs beside its claim loops, each on its own jittered
 * timer and each disabled by an interval of 0: the expired-lease recovery sweep, retention, and the
 * fairness pass (aging, ordering-key repair), and the scheduler firing cron schedules. All are
 * built the same way, from the context.
 */
export class WorkerMaintenance {
  readonly #services: { start(): void; stop(): Promise<void> }[] = [];

  constructor(context: WorkerContext, options: ResolvedWorkerOptions, hooks: MaintenanceHooks) {
    const base = { db: context.pool, schema: context.schema, onError: (err: unknown) => hooks.error(err) };
    if (options.recoveryIntervalMs > 0) {
      this.#services.push(
        new RecoveryService({
          ...base,
          intervalMs: options.recoveryIntervalMs,
          backoff: options.recoveryBackoff,
          batchSize: SWEEP_BATCHES.first,
          largestBatch: SWEEP_BATCHES.largest,
          followLapses: true,
          onRecovered: (result, dueInMs) => hooks.recovered(result, dueInMs),
        }),
      );
    }
    if (options.pruneIntervalMs > 0) {
      this.#services.push(
        new RetentionService({
          ...base,
          intervalMs: options.pruneIntervalMs,
          succeededRetentionMs: context.succeededRetentionMs,
          onPruned: (result) => hooks.pruned(result),
        }),
      );
    }
    if (options.agingPassIntervalMs > 0) {
      this.#services.push(
        new AgingService({
          ...base,
          intervalMs: options.agingPassIntervalMs,
          onAged: (result) => hooks.aged(result),
        }),
      );
    }
    if (options.laneRotationIntervalMs > 0) {
      this.#services.push(
        new LaneRotationService({
          ...base,
          intervalMs: options.laneRotationIntervalMs,
          onRotated: (result) => hooks.rotated(result),
        }),
      );
    }
    if (options.scheduleIntervalMs > 0) {
      this.#services.push(
        new SchedulerService({
          ...base,
          intervalMs: options.scheduleIntervalMs,
          onFired: (result) => hooks.scheduled(result),
        }),
      );
    }
  }

  /** Starts every enabled service. */
  start(): void {
    for (const service of this.#services) service.start();
  }

  /** Stops every service and waits for passes in progress. */
  async stop(): Promise<void> {
    await Promise.all(this.#services.map((service) => service.stop()));
  }
}
