import { defineStatement, type Queryable, run } from '../db.js';
import { type FenceRef, LEASE_FENCE, leaseValues } from '../fence.js';
import { refusalCountingCte } from '../refusals.js';
import { EVENT_FUNCTIONS } from './events.js';
import { INVOKE_FUNCTIONS } from './invoke.js';

// Every step statement starts from the lease it presents ($1 id, $2 token, $3 claim id, $4 owner,
// $5 queue), as the effects ledger's do (effects.ts): the job row is locked FOR SHARE while the
// lease is still current, so no transition ending the lease can commit between check and write.
const FENCED = (s: string, refusals: boolean) => `
  input AS (
    SELECT $1::bigint AS id, $2::bigint AS token, $3::bigint AS claim_id, $4::text AS owner, $5::text AS queue_name
  ),
  changed AS (
    SELECT j.id, j.queue_name, j.attempt_count
    FROM ${s}.jobs AS j, input
    WHERE ${LEASE_FENCE}
    FOR SHARE OF j
  )${refusals ? `,\n  ${refusalCountingCte(s, 'step')}` : ''}`;

/**
 * StepList: the steps recorded for a job whose lease is still current, in call order; one row
 * with `held` false and no step when the lease is not. Sleeps come with the milliseconds left
 * until their wake time (database time). A read: nothing written, no refusal counted (the write
 * that would follow is fenced itself). Primary-key range of job_steps.
 */
export const StepList = defineStatement(
  'step_list',
  (s) => `
  WITH ${FENCED(s, false)}
  SELECT h.held, st.seq, st.name, st.kind, st.result,
         greatest(0, extract(epoch FROM st.wake_at - now()) * 1000)::double precision AS remaining_ms
  FROM (SELECT (SELECT count(*) FROM changed) = 1 AS held) AS h
  LEFT JOIN ${s}.job_steps AS st ON h.held AND st.job_id = $1
  ORDER BY st.seq`,
);

/**
 * StepRecord: (no step $6) -> step $6 named $7 of kind $8 recorded, with JSON result $9 (a step)
 * or a wake time $10 ms from now in database time, or at $11 (a sleep), while the lease is
 * current, with a `step` event in the job's history (detail: the step's name and kind, a sleep's
 * wake time). A refused write is counted (operation 'step') and writes nothing. Returns whether the
 * lease held, whether the step was recorded now, and a sleep's milliseconds left.
 * Primary-key lookups on jobs and job_steps.
 */
export const StepRecord = defineStatement(
  'step_record',
  (s) => `
  WITH ${FENCED(s, true)},
  recorded AS (
    INSERT INTO ${s}.job_steps (job_id, seq, name, kind, result, wake_at, attempt, lease_token)
    SELECT changed.id, $6, $7, $8, $9::jsonb,
           CASE WHEN $8 = 'sleep'
                THEN coalesce($11::timestamptz, now() + $10::double precision * interval '1 millisecond')
           END,
           changed.attempt_count, $2
    FROM changed
    ON CONFLICT (job_id, seq) DO NOTHING
    RETURNING job_id, name, kind, wake_at, attempt
  ),
  step_event AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, attempt, lease_owner, lease_token, lease_claim_id, detail)
    SELECT r.job_id, changed.queue_name, 'step', r.attempt, $4, $2, $3,
           jsonb_build_object('step', r.name, 'kind', r.kind)
             || CASE WHEN r.wake_at IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('wakeAt', r.wake_at) END
    FROM recorded AS r, changed
  )
  SELECT (SELECT count(*) FROM changed) = 1 AS held,
         (SELECT count(*) FROM recorded) = 1 AS recorded,
         (SELECT greatest(0, extract(epoch FROM wake_at - now()) * 1000)::double precision FROM recorded)
           AS remaining_ms`,
);

/**
 * The step statements as SECURITY DEFINER functions of the worker role: entries of FUNCTIONS
 * (functions.ts), which spreads them in; parameter types in $n order, result columns.
 */
export const STEP_FUNCTIONS = [
  {
    role: 'worker',
    statement: StepList,
    args: 'bigint, bigint, bigint, text, text',
    returns: 'held boolean, seq integer, name text, kind text, result jsonb, remaining_ms double precision',
  },
  {
    role: 'worker',
    statement: StepRecord,
    args: 'bigint, bigint, bigint, text, text, integer, text, text, jsonb, double precision, timestamptz',
    returns: 'held boolean, recorded boolean, remaining_ms double precision',
  },
] as const;

/** Every function of durable steps: steps and sleeps, waits and events (events.ts), invokes (invoke.ts). */
export const DURABLE_STEP_FUNCTIONS = [...STEP_FUNCTIONS, ...EVENT_FUNCTIONS, ...INVOKE_FUNCTIONS] as const;

/** A step as recorded: its call position, numbered name, kind, result, and a sleep's time left. */
export interface RecordedStep {
  seq: number;
  name: string;
  kind: 'step' | 'sleep' | 'wait' | 'invoke';
  result: unknown;
  /** A sleep's milliseconds left until its wake time when read; null for a step. */
  remainingMs: number | null;
}

/** Reads a job's recorded steps by call position; null when the lease is no longer current. */
export async function listSteps(
  db: Queryable,
  schema: string,
  lease: FenceRef,
): Promise<Map<number, RecordedStep> | null> {
  const rows = await run<{
    held: boolean;
    seq: number | null;
    name: string;
    kind: 'step' | 'sleep' | 'wait' | 'invoke';
    result: unknown;
    remaining_ms: number | null;
  }>(db, StepList(schema), leaseValues(lease));
  if (!rows[0]?.held) return null;
  const steps = new Map<number, RecordedStep>();
  for (const row of rows) {
    if (row.seq === null) continue;
    steps.set(row.seq, {
      seq: row.seq,
      name: row.name,
      kind: row.kind,
      result: row.result ?? null,
      remainingMs: row.remaining_ms,
    });
  }
  return steps;
}

/** What to record: a step with its JSON result, or a sleep waking `ms` from now or at `at`. */
export type StepWrite =
  | { kind: 'step'; resultJson: string }
  | { kind: 'sleep'; ms: number | null; at: Date | null };

/** What `recordStep` did: the lease held, the row was written, and a sleep's time left. */
export interface StepRecorded {
  held: boolean;
  recorded: boolean;
  remainingMs: number | null;
}

/** Records step `seq` named `name` under the lease (fenced; a refusal is counted). */
export async function recordStep(
  db: Queryable,
  schema: string,
  lease: FenceRef,
  seq: number,
  name: string,
  write: StepWrite,
): Promise<StepRecorded> {
  const rows = await run<{ held: boolean; recorded: boolean; remaining_ms: number | null }>(
    db,
    StepRecord(schema),
    [
      ...leaseValues(lease),
      seq,
      name,
      write.kind,
      write.kind === 'step' ? write.resultJson : null,
      write.kind === 'sleep' ? write.ms : null,
      write.kind === 'sleep' ? write.at : null,
    ],
  );
  const row = rows[0];
  return {
    held: row?.held ?? false,
    recorded: row?.recorded ?? false,
    remainingMs: row?.remaining_ms ?? null,
  };
}
