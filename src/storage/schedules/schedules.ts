import { defineStatement, type Queryable, run } from '../db.js';

/** A schedule's definition as validated by `lh.schedule` (src/operations/schedules.ts). */
export interface ScheduleDefinition {
  name: string;
  cron: string;
  timezone: string | null;
  queue: string;
  task: string | null;
  payloadJson: string;
  priority: number;
  maxAttempts: number;
  orderingKey: string | null;
  concurrencyKey: string | null;
  catchUp: 'none' | 'latest' | 'backfill';
  catchUpMax: number;
}

/** A schedules row as read back, with the database's now() of the statement that read it. */
export interface ScheduleRow {
  name: string;
  cron: string;
  timezone: string | null;
  queue_name: string;
  task_name: string | null;
  payload: unknown;
  priority: number;
  max_attempts: number;
  ordering_key: string | null;
  concurrency_key: string | null;
  catch_up: 'none' | 'latest' | 'backfill';
  catch_up_max: number;
  paused: boolean;
  revision: string;
  fire_after: Date;
  last_tick_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** The newest tick that fired a job (from schedule_ticks), if any is kept. */
  last_job_id: string | null;
  db_now: Date;
}

const columns = (
  payload: string,
) => `s.name, s.cron, s.timezone, s.queue_name, s.task_name, ${payload} AS payload, s.priority,
         s.max_attempts, s.ordering_key, s.concurrency_key, s.catch_up, s.catch_up_max, s.paused,
         s.revision::text AS revision, s.fire_after, s.last_tick_at, s.created_at, s.updated_at`;

/**
 * ScheduleUpsert: (nothing) -> schedule, or schedule -> schedule (its definition replaced).
 * Takes the row lock of the name (the primary key's conflict). The revision goes up on every
 * change, so a scheduler's fire computed from the old definition changes nothing; fire_after moves
 * to now() only when the cron or the zone changed, so ticks the old timetable named (or the past,
 * for a new schedule) never fire. The pause state and the last tick are kept.
 */
const ScheduleUpsert = defineStatement(
  'schedule_upsert',
  (s) => `
  INSERT INTO ${s}.schedules AS s (name, cron, timezone, queue_name, task_name, payload, priority,
                                   max_attempts, ordering_key, concurrency_key, catch_up, catch_up_max)
  VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12)
  ON CONFLICT (name) DO UPDATE
    SET cron = excluded.cron, timezone = excluded.timezone, queue_name = excluded.queue_name,
        task_name = excluded.task_name, payload = excluded.payload, priority = excluded.priority,
        max_attempts = excluded.max_attempts, ordering_key = excluded.ordering_key,
        concurrency_key = excluded.concurrency_key, catch_up = excluded.catch_up,
        catch_up_max = excluded.catch_up_max, revision = s.revision + 1, updated_at = now(),
        fire_after = CASE WHEN (s.cron, s.timezone) IS DISTINCT FROM (excluded.cron, excluded.timezone)
                          THEN now() ELSE s.fire_after END
  RETURNING (xmax = 0) AS created`,
);

/** Creates or replaces a schedule's definition; true when it was created. */
export async function upsertSchedule(
  db: Queryable,
  schema: string,
  def: ScheduleDefinition,
): Promise<boolean> {
  const rows = await run<{ created: boolean }>(db, ScheduleUpsert(schema), [
    def.name,
    def.cron,
    def.timezone,
    def.queue,
    def.task,
    def.payloadJson,
    def.priority,
    def.maxAttempts,
    def.orderingKey,
    def.concurrencyKey,
    def.catchUp,
    def.catchUpMax,
  ]);
  return rows[0]?.created ?? false;
}

/**
 * ScheduleDelete: schedule -> (nothing). Its fired ticks stay as the history of their jobs until
 * the scheduler prunes them. Primary-key delete.
 */
const ScheduleDelete = defineStatement(
  'schedule_delete',
  (s) => `DELETE FROM ${s}.schedules WHERE name = $1 RETURNING name`,
);

/** Removes a schedule; false when there was none by that name. */
export async function deleteSchedule(db: Queryable, schema: string, name: string): Promise<boolean> {
  return (await run(db, ScheduleDelete(schema), [name])).length > 0;
}

/**
 * SchedulePause: schedule -> schedule paused ($2 true) or active ($2 false). A change bumps the
 * revision (an in-flight fire changes nothing); resuming moves fire_after to now(), so the ticks
 * named while paused do not fire. Setting the state it already has changes nothing. Primary key.
 */
const SchedulePause = defineStatement('schedule_pause', (s) => schedulePauseUpdate(s));

/** SchedulePause's UPDATE (schedule $1, paused $2), RETURNING name: operator-actions.ts audits it. */
export function schedulePauseUpdate(s: string): string {
  return `
  UPDATE ${s}.schedules
  SET paused = $2,
      revision = CASE WHEN paused = $2 THEN revision ELSE revision + 1 END,
      fire_after = CASE WHEN paused AND NOT $2 THEN now() ELSE fire_after END,
      updated_at = CASE WHEN paused = $2 THEN updated_at ELSE now() END
  WHERE name = $1
  RETURNING name`;
}

/** Pauses or resumes a schedule; false when there is none by that name. */
export async function setSchedulePaused(
  db: Queryable,
  schema: string,
  name: string,
  paused: boolean,
): Promise<boolean> {
  return (await run(db, SchedulePause(schema), [name, paused])).length > 0;
}

/**
 * ScheduleList: schedules in name order after $1 (paging), at most $2, each with the job of its
 * newest kept tick and the database's now(). $3 true lists only active (unpaused) ones, as the
 * scheduler reads them. Primary-key range scan; the newest tick is one backward index probe of
 * schedule_ticks' primary key per schedule. No locks.
 */
const scheduleListText = (payload: string) => (s: string) =>
  `
  SELECT ${columns(payload)},
         (SELECT t.job_id::text FROM ${s}.schedule_ticks AS t
          WHERE t.schedule_name = s.name ORDER BY t.tick_at DESC LIMIT 1) AS last_job_id,
         now() AS db_now
  FROM ${s}.schedules AS s
  WHERE s.name > $1 AND (NOT $3 OR NOT s.paused)
  ORDER BY s.name
  LIMIT $2`;
export const ScheduleList = defineStatement('schedule_list', scheduleListText('s.payload'));

/**
 * ScheduleList for the producer and worker roles, which may not read a schedule's payload (issue 17):
 * the payload reads null. Run in its place on a `viaFunctions` connection (STAND_INS, functions.ts).
 */
export const ScheduleListWithoutPayload = defineStatement(
  'schedule_list_without_payload',
  scheduleListText('NULL::jsonb'),
);

/** Reads up to `limit` schedules named after `after` (name order); `activeOnly` skips paused ones. */
export function listScheduleRows(
  db: Queryable,
  schema: string,
  { after = '', limit, activeOnly = false }: { after?: string; limit: number; activeOnly?: boolean },
): Promise<ScheduleRow[]> {
  return run<ScheduleRow>(db, ScheduleList(schema), [after, limit, activeOnly]);
}

/** ScheduleGet: one schedule by name, as ScheduleList reads it. Primary key; no locks. */
const scheduleGetText = (payload: string) => (s: string) =>
  `
  SELECT ${columns(payload)},
         (SELECT t.job_id::text FROM ${s}.schedule_ticks AS t
          WHERE t.schedule_name = s.name ORDER BY t.tick_at DESC LIMIT 1) AS last_job_id,
         now() AS db_now
  FROM ${s}.schedules AS s
  WHERE s.name = $1`;
export const ScheduleGet = defineStatement('schedule_get', scheduleGetText('s.payload'));

/** ScheduleGet without the payload (it reads null), for the producer and worker roles. */
export const ScheduleGetWithoutPayload = defineStatement(
  'schedule_get_without_payload',
  scheduleGetText('NULL::jsonb'),
);

/** Reads one schedule; null when there is none by that name. */
export async function readScheduleRow(
  db: Queryable,
  schema: string,
  name: string,
): Promise<ScheduleRow | null> {
  return (await run<ScheduleRow>(db, ScheduleGet(schema), [name]))[0] ?? null;
}

/**
 * JobScheduleTick: which schedule and tick created job $1, if a schedule did and the tick is still
 * kept. Served by schedule_ticks_job_idx; no locks.
 */
const JobScheduleTick = defineStatement(
  'job_schedule_tick',
  (s) => `
  SELECT schedule_name, tick_at FROM ${s}.schedule_ticks WHERE job_id = $1 ORDER BY tick_at LIMIT 1`,
);

/** The schedule and tick that created a job; null for a job no schedule created. */
export async function readJobScheduleTick(
  db: Queryable,
  schema: string,
  jobId: string,
): Promise<{ name: string; tickAt: Date } | null> {
  const rows = await run<{ schedule_name: string; tick_at: Date }>(db, JobScheduleTick(schema), [jobId]);
  const row = rows[0];
  return row ? { name: row.schedule_name, tickAt: row.tick_at } : null;
}
