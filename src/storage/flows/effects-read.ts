import { defineStatement, type Queryable, run } from '../db.js';

/**
 * JobEffectList: a job's effects ledger entries (intent, result or not), by intent time; at most
 * $2. Primary-key range of job_effects (job_id, name). Read-only.
 */
const JobEffectList = defineStatement(
  'job_effect_list',
  (s) => `
  SELECT name, effect_key, attempt, lease_token::text AS lease_token, intent_at, result_at,
         result IS NOT NULL AS has_result
  FROM ${s}.job_effects
  WHERE job_id = $1
  ORDER BY intent_at, name
  LIMIT $2`,
);

/** An effects ledger entry as listed (its result's content is not read). */
export interface EffectRow {
  name: string;
  effect_key: string;
  attempt: number;
  lease_token: string;
  intent_at: Date;
  result_at: Date | null;
  has_result: boolean;
}

/** Reads a job's effects ledger entries. */
export function listJobEffects(
  db: Queryable,
  schema: string,
  jobId: string,
  limit: number,
): Promise<EffectRow[]> {
  return run<EffectRow>(db, JobEffectList(schema), [jobId, limit]);
}
