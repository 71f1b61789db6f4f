import { DEFAULT_AGING_LIMIT } from '../shared/defaults.js';
import { type OrderingKeyCursor, repairOrderingKeys, scanOrderingKeys } from '../storage/queues/ordering.js';
import { agePendingJobs, probeFairnessWork } from '../storage/upkeep/aging.js';
import { type MaintenanceServiceOptions, PeriodicService } from './periodic-service.js';

export { DEFAULT_AGING_LIMIT, DEFAULT_AGING_PASS_INTERVAL_MS } from '../shared/defaults.js';

/** Most queues with aging one pass visits. */
const MAX_AGING_QUEUES = 1000;
/** Most ordering keys one pass repairs or removes. */
const ORDERING_REPAIR_LIMIT = 1000;
/** Ordering keys one pass re-checks in the paged scan for heads that are set but no longer live. */
const ORDERING_SCAN_PAGE = 500;

/** What one fairness maintenance pass did. */
export interface AgingResult {
  /** Pending jobs whose priority was raised. */
  raised: number;
  /** Ordering keys handed to their next job after a missed hand-over. */
  keysReleased: number;
  /** Idle ordering keys removed. */
  keysRemoved: number;
}

/** Options of the aging service. */
export interface AgingServiceOptions extends MaintenanceServiceOptions {
  /** Called after a pass that changed something. */
  onAged?: (result: AgingResult) => void;
}

/**
 * The fairness maintenance step: raises the priority of long-waiting jobs in queues with aging
 * (`agingIntervalMs`), bounded per queue, and repairs ordering keys whose hand-over a concurrent
 * enqueue made a statement miss, removing idle key rows on the way. Every statement is bounded and
 * takes rows SKIP LOCKED, so every worker runs one without a leader.
 */
export class AgingService extends PeriodicService<AgingResult> {
  // The paged scan resumes where the last pass stopped, so every key is re-checked in turn.
  #scanCursor: OrderingKeyCursor = null;

  constructor(private readonly options: AgingServiceOptions) {
    super(options.intervalMs, options.onError);
  }

  /** Runs one pass now. */
  override async runOnce(): Promise<AgingResult> {
    const { db, schema } = this.options;
    let raised = 0;
    const work = await probeFairnessWork(db, schema, MAX_AGING_QUEUES);
    for (const queue of work.agingQueues) {
      raised += await agePendingJobs(db, schema, queue, DEFAULT_AGING_LIMIT);
    }
    // No key row, nothing to repair or remove: a key taken after the probe is the next pass's.
    const nothing = { released: 0, removed: 0 };
    const repair = work.orderingKeys
      ? await repairOrderingKeys(db, schema, [], ORDERING_REPAIR_LIMIT)
      : nothing;
    const scan = work.orderingKeys
      ? await scanOrderingKeys(db, schema, ORDERING_SCAN_PAGE, this.#scanCursor)
      : { result: nothing, next: null };
    this.#scanCursor = scan.next;
    const result = {
      raised,
      keysReleased: repair.released + scan.result.released,
      keysRemoved: repair.removed + scan.result.removed,
    };
    if (raised + repair.released + repair.removed > 0) this.options.onAged?.(result);
    return result;
  }
}
