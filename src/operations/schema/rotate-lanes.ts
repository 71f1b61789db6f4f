import type { LeaseholdContext } from '../../context/context.js';
import { type LaneRotationResult, rotateLanes as rotatePass } from '../../maintenance/lane-rotation.js';

export type { LaneRotationResult } from '../../maintenance/lane-rotation.js';

/** `lh.rotateLanes`: one lane rotation pass now, on the context's pool (docs/storage.md). */
export function rotateLanes(context: LeaseholdContext): Promise<LaneRotationResult> {
  return rotatePass(context.pool, context.schema);
}
