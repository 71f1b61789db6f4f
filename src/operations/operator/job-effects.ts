import type { LeaseholdContext } from '../../context/context.js';
import { assertJobId } from '../../shared/validation.js';
import { type EffectRow, listJobEffects } from '../../storage/flows/effects-read.js';

export type { EffectRow } from '../../storage/flows/effects-read.js';

/** Most effects one read returns (a job's timeline in the dashboard). */
const MAX_EFFECTS = 100;

/** The recorded effects of job `id`, oldest first (the dashboard's timeline reads them). */
export function jobEffects(context: LeaseholdContext, id: string): Promise<EffectRow[]> {
  return listJobEffects(context.pool, context.schema, assertJobId(id), MAX_EFFECTS);
}
