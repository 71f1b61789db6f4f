import type { Leasehold } from '../client.js';
import { type AgingResult, AgingService } from '../maintenance/aging.js';
import { type RecoveryResult, RecoveryService, sweepInGrowingBatches } from '../maintenance/recovery.js';
import {
  DEFAULT_PRUNE_BATCH,
  DEFAULT_PRUNE_LIMIT,
  type PruneResult,
  prunePass,
  RetentionService,
} from '../maintenance/retention.js';
import { msUntilNextLeaseExpiry, recoverExpiredLeases } from '../storage/recover.js';
import type { ResolvedWorkerOptions } from './options.js';

/** What the worker does with the maintenance services' results. */
export interface MaintenanceHooks {
  /** A pass moved leases; `dueInMs`: when the last job it returned to pending becomes claimable. */
  recovered(result: RecoveryResult, dueInMs: number): void;
  pruned(result: PruneResult): void;
  aged(result: AgingResult): void;
  error(err: unknown): void;
}

/**
 * The background services every worker runs beside its claim loops, each on its own jittered
 * timer and each disabled by an interval of 0: the expired-lease recovery sweep, retention, and the
 * fairness pass (aging, ordering-key repair).
 */
export class WorkerMaintenance {
  readonly #services: { start(): void; stop(): Promise<void> }[] = [];

  constructor(lh: Leasehold, options: ResolvedWorkerOptions, hooks: MaintenanceHooks) {
    const onError = (err: unknown) => hooks.error(err);
    if (options.recoveryIntervalMs > 0) {
      let dueInMs = 0;
      this.#services.push(
        new RecoveryService({
          intervalMs: options.recoveryIntervalMs,
          recover: () =>
            sweepInGrowingBatches(async (limit) => {
              const moved = await recoverExpiredLeases(lh.pool, lh.schema, {
                limit,
                ...options.recoveryBackoff,
              });
              dueInMs = Math.max(dueInMs, moved.maxDelayMs);
              return moved;
            }),
          nextLapseInMs: () => msUntilNextLeaseExpiry(lh.pool, lh.schema),
          onRecovered: (result) => {
            hooks.recovered({ retried: result.retried, dead: result.dead }, dueInMs);
            dueInMs = 0;
          },
          onError,
        }),
      );
    }
    if (options.pruneIntervalMs > 0) {
      this.#services.push(
        new RetentionService({
          intervalMs: options.pruneIntervalMs,
          pool: lh.pool,
          schema: lh.schema,
          prune: (runBatch) =>
            prunePass(runBatch, lh.schema, {
              succeededRetentionMs: lh.succeededRetentionMs,
              batchSize: DEFAULT_PRUNE_BATCH,
              limit: DEFAULT_PRUNE_LIMIT,
            }),
          onPruned: (result) => hooks.pruned(result),
          onError,
        }),
      );
    }
    if (options.agingPassIntervalMs > 0) {
      this.#services.push(
        new AgingService({
          intervalMs: options.agingPassIntervalMs,
          db: lh.pool,
          schema: lh.schema,
          onAged: (result) => hooks.aged(result),
          onError,
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
