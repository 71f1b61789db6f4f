import type pg from 'pg';
import { DatabaseError } from '../../shared/errors.js';
import { isPool, type Queryable, run, type Statement } from '../db.js';

/**
 * Routing a batched write on jobs to the lanes its rows live in (migration 018; docs/storage.md).
 *
 * PostgreSQL prunes the partitions of a statement on a constant `lane = N` when it plans it, but
 * not on `id = ANY (ARRAY(subquery))`: a write by id over the parent probes the id index of every
 * lane for every id, and the lane receiving new jobs (tens of thousands of entries, most of them
 * dead under churn) is probed for ids that are not there. Split into one write per lane, each id
 * is looked up once, in the lane where the row lock taken earlier in the same statement found it
 * (a locked row cannot be moved to another lane before this statement ends).
 */

/** The lanes of jobs and finished_jobs: 0 the cold lane, 1 to 3 the hot ones (migration 018). */
export const JOB_LANES = [0, 1, 2, 3] as const;

/**
 * One CTE per lane, `${name}_0` to `${name}_3`, each built by `build(lane)` (a write restricted to
 * `lane = <lane>`, with a RETURNING list the same for every lane), then the CTE `name` that unions
 * their rows. The statement reads `name` as it read the single write before. Unrouted, `name` is
 * the one write `build(null)`, through the parent.
 */
export function perLaneCtes(name: string, routed: boolean, build: (lane: number | null) => string): string {
  if (!routed) return `${name} AS (${build(null)})`;
  const writes = JOB_LANES.map((lane) => `${name}_${lane} AS (${build(lane)})`);
  const union = JOB_LANES.map((lane) => `SELECT * FROM ${name}_${lane}`).join('\n    UNION ALL ');
  return `${writes.join(',\n  ')},\n  ${name} AS (\n    ${union}\n  )`;
}

/**
 * The condition of a write on `jobs AS j` to the rows whose ids the CTE `source` holds: those in
 * `lane` (when routed), or all of them. `queue` (a scalar parameter, `$1`) restricts the write to
 * the statement's one queue, so that a layout split by queue is written in that queue's part only
 * (an id list is no key to it: see docs/scaling.md).
 */
export function idsFrom(source: string, lane: number | null, queue?: string): string {
  const inQueue = queue === undefined ? '' : `j.queue_name = ${queue}::text AND `;
  return lane === null
    ? `${inQueue}j.id = ANY (ARRAY(SELECT id FROM ${source}))`
    : `${inQueue}j.lane = ${lane} AND j.id = ANY (ARRAY(SELECT id FROM ${source} WHERE lane = ${lane}))`;
}

/** How long a schema without lanes is written to by the unrouted statements before a retry. */
const WITHOUT_LANES_RETRY_MS = 30_000;
/** Schemas found without the lane column, to the time (this process's clock) to try again. */
const withoutLanesUntil = new Map<string, number>();

/**
 * Runs `routed` (a statement per lane), or `unrouted` (the same write through the parent by id)
 * on a schema not yet migrated to lanes (018): a process of this version started before the
 * migration ran, as in a rolling upgrade. There the routed statement fails with 42703 (no `lane`
 * column) and changes nothing; sent on a pool, the unrouted one then runs instead, and that schema
 * gets the unrouted statements until a pooled one, tried again every 30 s, finds the lanes.
 * In a caller's transaction (`db` a client) a failed statement would abort the transaction, so
 * nothing is tried twice there: the routed statement runs unless the schema was found without
 * lanes (a worker's claims, which run on its pool, find that out before any of its handlers runs).
 * A role client runs both through the schema's functions, which exist only once 018 has run.
 * The completions' routed statements also read 019's `job_dependencies.child_queue` (the flow
 * release, flow-release.ts): on a schema at 018 they fail the same way, and their unrouted
 * variants, which look flow children up by id, serve until 019 has run. So does 027's job
 * identity (jobs.job_uid): the claims name it, and on a schema before 027 fall back to variants
 * that read it without naming it (`UidRead`, claim/fragments.ts), the completion to one that does
 * not copy it, the uniform batch insert to one that does not name it (`unroutedValues`: the twin
 * takes no identities).
 */
export async function runLaneRouted<R extends pg.QueryResultRow>(
  db: Queryable,
  schema: string,
  routed: Statement,
  unrouted: Statement,
  values: unknown[],
  unroutedValues: unknown[] = values,
): Promise<R[]> {
  const until = withoutLanesUntil.get(schema);
  const pooled = isPool(db);
  if (until !== undefined && (!pooled || Date.now() < until)) return run<R>(db, unrouted, unroutedValues);
  if (!pooled) return run<R>(db, routed, values);
  try {
    const rows = await run<R>(db, routed, values);
    if (until !== undefined) withoutLanesUntil.delete(schema);
    return rows;
  } catch (err) {
    if (!(err instanceof DatabaseError) || !BEFORE_LANES.has(err.sqlState ?? '')) throw err;
    withoutLanesUntil.set(schema, Date.now() + WITHOUT_LANES_RETRY_MS);
    return run<R>(db, unrouted, unroutedValues);
  }
}

// What a routed statement meets on a schema before 018: no lane column (undefined_column), or no
// job_lane_at() (undefined_function), for a statement that names a new row's lane once.
const BEFORE_LANES = new Set(['42703', '42883']);
