import { DatabaseError } from '../shared/errors.js';
import type { Queryable } from '../storage/db.js';
import { moveLaneRows, truncateDrainedLanes } from '../storage/roles/lanes.js';
import { type MaintenanceServiceOptions, PeriodicService } from './periodic-service.js';

export { DEFAULT_LANE_ROTATION_INTERVAL_MS } from '../shared/defaults.js';

/** Rows one move statement takes out of each lane: one short transaction of bounded size. */
const MOVE_BATCH = 2000;
/** Most move statements per pass; what is left waits for the next pass. */
const MOVE_BATCHES_PER_PASS = 25;

/** What one rotation pass did. */
export interface LaneRotationResult {
  /** Rows moved out of lanes due to be emptied (to the receiving lane or the cold lane). */
  moved: number;
  /** Hot lanes truncated, by table name (`jobs_lane_2`, `finished_jobs_lane_1`). */
  truncated: string[];
}

/**
 * One rotation pass (docs/storage.md): moves what is left in the hot lanes due to be emptied, in
 * bounded statements, then truncates the lanes found empty. A schema not yet migrated to lanes
 * (migration 018: a rolling upgrade) has nothing to rotate.
 */
export async function rotateLanes(db: Queryable, schema: string): Promise<LaneRotationResult> {
  const result: LaneRotationResult = { moved: 0, truncated: [] };
  try {
    for (let batches = 0; batches < MOVE_BATCHES_PER_PASS; batches++) {
      const step = await moveLaneRows(db, schema, MOVE_BATCH);
      result.moved += step.moved;
      if (step.lanesLeft === 0 || step.moved === 0) break;
    }
    result.truncated = await truncateDrainedLanes(db, schema);
  } catch (err) {
    if (err instanceof DatabaseError && err.sqlState === UNDEFINED_FUNCTION) return result;
    throw err;
  }
  return result;
}

const UNDEFINED_FUNCTION = '42883';

/** Options of the lane rotation service. */
export interface LaneRotationServiceOptions extends MaintenanceServiceOptions {
  /** Called after a pass that moved or truncated something. */
  onRotated?: (result: LaneRotationResult) => void;
}

/**
 * Keeps the hot lanes emptied by TRUNCATE rather than by VACUUM, so that a snapshot pinning the
 * xmin horizon cannot make them grow. Every worker runs it: the moves take rows SKIP LOCKED and
 * the truncation checks emptiness under the lane's lock, so concurrent passes are safe.
 */
export class LaneRotationService extends PeriodicService<LaneRotationResult> {
  constructor(private readonly options: LaneRotationServiceOptions) {
    super(options.intervalMs, options.onError);
  }

  /** Runs one pass now. */
  override async runOnce(): Promise<LaneRotationResult> {
    const result = await rotateLanes(this.options.db, this.options.schema);
    if (result.moved > 0 || result.truncated.length > 0) this.options.onRotated?.(result);
    return result;
  }
}
