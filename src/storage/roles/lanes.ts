import { defineStatement, type Queryable, run } from '../db.js';

/**
 * The lane rotation's two statements (migration 018; docs/storage.md). Each calls a SECURITY
 * DEFINER function of the schema, so a worker role that may not TRUNCATE still rotates.
 *
 * JobLaneRowsMove: moves up to $1 rows out of each hot lane that no longer receives jobs and is
 * not the one that just stopped: running jobs to the lane receiving jobs, the rest (a backlog
 * included) to the cold lane. Rows locked by a claim or a completion in flight are skipped.
 */
const JobLaneRowsMove = defineStatement(
  'move_job_lane_rows',
  (s) => `SELECT moved::float8 AS moved, lanes_left FROM ${s}.move_job_lane_rows($1)`,
);

/**
 * JobLanesTruncate: truncates each hot lane of jobs and finished_jobs, other than the one receiving
 * rows, that holds no row and still has storage; emptiness is checked again under the lane's
 * exclusive lock, which it waits for at most 50 ms. Returns the lanes' table names.
 */
const JobLanesTruncate = defineStatement(
  'truncate_job_lanes',
  (s) => `SELECT ${s}.truncate_job_lanes() AS truncated`,
);

/** What one move statement did. */
export interface LaneMoveResult {
  moved: number;
  /** Hot lanes (other than the receiving and the finishing one) that still hold rows. */
  lanesLeft: number;
}

/** Moves up to `batch` rows out of each lane due to be emptied. */
export async function moveLaneRows(db: Queryable, schema: string, batch: number): Promise<LaneMoveResult> {
  const rows = await run<{ moved: number; lanes_left: number }>(db, JobLaneRowsMove(schema), [batch]);
  return { moved: rows[0]?.moved ?? 0, lanesLeft: rows[0]?.lanes_left ?? 0 };
}

/** Truncates the drained lanes it can lock in time; returns their table names (`jobs_lane_2`). */
export async function truncateDrainedLanes(db: Queryable, schema: string): Promise<string[]> {
  const rows = await run<{ truncated: string[] }>(db, JobLanesTruncate(schema), []);
  return rows[0]?.truncated ?? [];
}
