import { defineStatement, type Queryable, run } from '../db.js';
import { type FenceRef, LEASE_FENCE, leaseValues } from '../fence.js';
import { refusalCountingCte } from '../refusals.js';

// Every effects write starts from the lease it presents ($1 id, $2 token, $3 claim id, $4 owner, $5 queue) and
// locks the job row FOR SHARE while the lease is still current: no transition that would end the
// lease (recovery, cancel, completion) can commit between the check and the write. A refused
// write is counted and recorded like any other lost-fence attempt.
const FENCED = (s: string) => `
  input AS (
    SELECT $1::bigint AS id, $2::bigint AS token, $3::bigint AS claim_id, $4::text AS owner, $5::text AS queue_name
  ),
  changed AS (
    SELECT j.id, j.attempt_count
    FROM ${s}.jobs AS j, input
    WHERE ${LEASE_FENCE}
    FOR SHARE OF j
  ),
  ${refusalCountingCte(s, 'effect')}`;

/**
 * EffectBegin: (no entry) -> intent recorded, for effect $6 (key $7) of a job whose lease is still
 * current. Returns whether the lease held, whether the intent was recorded now, and any entry
 * recorded before (by an earlier attempt): with its result, or without one (an uncertain outcome).
 * Primary-key lookups on jobs and job_effects.
 */
export const EffectBegin = defineStatement(
  'effect_begin',
  (s) => `
  WITH ${FENCED(s)},
  existing AS (
    SELECT true AS found, e.result, e.result_at
    FROM ${s}.job_effects AS e
    WHERE e.job_id = $1 AND e.name = $6
  ),
  intent AS (
    INSERT INTO ${s}.job_effects (job_id, name, effect_key, attempt, lease_token)
    SELECT changed.id, $6, $7, changed.attempt_count, $2 FROM changed
    ON CONFLICT (job_id, name) DO NOTHING
    RETURNING job_id
  )
  SELECT (SELECT count(*) FROM changed) = 1 AS held,
         (SELECT count(*) FROM intent) = 1 AS recorded,
         existing.result_at IS NOT NULL AS has_result,
         coalesce(existing.found, false) AND existing.result_at IS NULL AS uncertain,
         existing.result
  FROM (SELECT 1) AS one
  LEFT JOIN existing ON true`,
);

/**
 * EffectRecordResult: intent -> result, for effect $6 with JSON result $7, while the lease is
 * current. A worker fenced out here leaves the intent without a result: uncertain, for the next
 * attempt to reconcile. Primary-key lookups.
 */
export const EffectRecordResult = defineStatement(
  'effect_record_result',
  (s) => `
  WITH ${FENCED(s)},
  recorded AS (
    UPDATE ${s}.job_effects AS e
    SET result = $7::jsonb, result_at = now()
    FROM changed
    WHERE e.job_id = changed.id AND e.name = $6
    RETURNING e.job_id
  )
  SELECT (SELECT count(*) FROM recorded) = 1 AS recorded`,
);

/**
 * EffectRearm: uncertain intent -> intent of this attempt, when reconciliation found that the
 * effect did not happen and it is about to be performed again. Fenced; primary-key lookups.
 */
export const EffectRearm = defineStatement(
  'effect_rearm',
  (s) => `
  WITH ${FENCED(s)},
  rearmed AS (
    UPDATE ${s}.job_effects AS e
    SET attempt = changed.attempt_count, lease_token = $2, intent_at = now()
    FROM changed
    WHERE e.job_id = changed.id AND e.name = $6 AND e.result_at IS NULL
    RETURNING e.job_id
  )
  SELECT (SELECT count(*) FROM rearmed) = 1 AS rearmed`,
);

/** What `beginEffect` found. */
export interface EffectState {
  /** The lease was still current; false means nothing was written. */
  held: boolean;
  /** The intent was recorded by this call: perform the effect now. */
  recorded: boolean;
  /** An earlier attempt recorded a result: here it is. */
  hasResult: boolean;
  /** An earlier attempt recorded the intent but no result: the outcome is unknown. */
  uncertain: boolean;
  result: unknown;
}

/** Records an effect's intent unless one exists; reports what was there. */
export async function beginEffect(
  db: Queryable,
  schema: string,
  lease: FenceRef,
  name: string,
  key: string,
): Promise<EffectState> {
  const rows = await run<{
    held: boolean;
    recorded: boolean;
    has_result: boolean;
    uncertain: boolean | null;
    result: unknown;
  }>(db, EffectBegin(schema), [...leaseValues(lease), name, key]);
  const row = rows[0];
  return {
    held: row?.held ?? false,
    recorded: row?.recorded ?? false,
    hasResult: row?.has_result ?? false,
    uncertain: row?.uncertain ?? false,
    result: row?.result ?? null,
  };
}

/** Records an effect's result; false when the lease was lost (nothing written). */
export async function recordEffectResult(
  db: Queryable,
  schema: string,
  lease: FenceRef,
  name: string,
  resultJson: string,
): Promise<boolean> {
  const rows = await run<{ recorded: boolean }>(db, EffectRecordResult(schema), [
    ...leaseValues(lease),
    name,
    resultJson,
  ]);
  return rows[0]?.recorded ?? false;
}

/** Re-arms an uncertain intent for this attempt; false when the lease was lost. */
export async function rearmEffect(
  db: Queryable,
  schema: string,
  lease: FenceRef,
  name: string,
): Promise<boolean> {
  const rows = await run<{ rearmed: boolean }>(db, EffectRearm(schema), [...leaseValues(lease), name]);
  return rows[0]?.rearmed ?? false;
}
