import { traceClaim } from '../../observability/tracing.js';
import type { ClaimedRow } from '../../storage/leases/claim.js';
import type { IdleRun } from '../idle-run.js';
import type { ResolvedQueue } from '../options.js';
import type { WorkerContext } from '../worker-context.js';
import type { WorkerEventSource } from '../worker-events.js';
import { ClaimRouter, type Throttle } from './claim-router.js';
import type { ClaimSizing } from './queue-runner.js';

/**
 * How a worker claims for its queues: one `ClaimRouter` statement per batch, traced when tracing
 * is on (each job's enqueue-span context kept until its handler starts), counted, reported as a
 * `claimed` event when someone listens, and, during an idle run, within what the run may still
 * claim (`maxJobs`).
 */
export class WorkerClaims {
  readonly #router: ClaimRouter;
  readonly #traceparents = new Map<string, string>();

  constructor(
    private readonly context: Pick<WorkerContext, 'pool' | 'schema'>,
    private readonly worker: WorkerEventSource & { readonly counters: { claimed: number } },
  ) {
    this.#router = new ClaimRouter(context.pool, context.schema);
  }

  /** Claims up to `asked` jobs of a queue (fewer when an idle run's budget is smaller; none at 0). */
  async claim(
    config: ResolvedQueue,
    asked: number,
    sizing: ClaimSizing,
    idleRun: IdleRun | null,
  ): Promise<ClaimedRow[]> {
    const limit = idleRun ? idleRun.claimLimit(asked) : asked;
    if (limit === 0) return [];
    const { worker } = this;
    const sentAt = performance.now();
    const { rows, traceparents } = await traceClaim(
      { db: this.context.pool, schema: this.context.schema, queue: config.name },
      () => this.#router.claim({ queue: config.name, owner: worker.owner, limit, leaseMs: config.leaseMs }),
    );
    if (traceparents) for (const [id, parent] of traceparents) this.#traceparents.set(id, parent);
    worker.counters.claimed += rows.length;
    idleRun?.claimed(rows.length);
    if (worker.listenerCount('claimed') > 0) {
      // Both times are the database's: the claim began the lease leaseMs before its expiry.
      const waitMs = rows.map((row) => row.lease_expires_ms - config.leaseMs - row.available_ms);
      worker.emit('claimed', config.name, {
        jobs: rows.length,
        durationMs: performance.now() - sentAt,
        waitMs,
        ...sizing,
      });
    }
    return rows;
  }

  /** True when the queue's last claim came back short from a floor (see claim-floor.ts). */
  frontClaimDue(queue: string): boolean {
    return this.#router.frontClaimDue(queue);
  }

  /** The queue's throttle after its last claim: when a limited queue may claim again, else null. */
  throttled(queue: string): Throttle | null {
    return this.#router.throttled(queue);
  }

  /** The enqueue span's context of a claimed job, read at claim time while tracing; used once. */
  takeTraceparent(jobId: string): string | undefined {
    const parent = this.#traceparents.get(jobId);
    if (parent !== undefined) this.#traceparents.delete(jobId);
    return parent;
  }
}
