import type { LeaseholdContext } from '../../context/context.js';
import { fireDueSchedules, type SchedulerResult, ticksAfter } from '../../maintenance/scheduler.js';
import { loadTimetables, MAX_CATCH_UP } from '../../maintenance/timetables.js';
import { assertPayloadMatches } from '../../runtime/run/payload-schema.js';
import type { AnyTask } from '../../runtime/task.js';
import { MAX_ATTEMPTS_LIMIT } from '../../shared/config.js';
import {
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_PRIORITY,
  DEFAULT_SCHEDULE_LATE_AFTER_MS,
} from '../../shared/defaults.js';
import { ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import {
  assertInt,
  assertQueueName,
  optionalInt,
  optionalText,
  optionsObject,
  PRIORITY_LIMIT,
  serialisePayload,
} from '../../shared/validation.js';
import {
  deleteSchedule,
  listScheduleRows,
  readScheduleRow,
  type ScheduleDefinition,
  type ScheduleRow,
  setSchedulePaused,
  upsertSchedule,
} from '../../storage/schedules/schedules.js';

export type { SchedulerResult } from '../../maintenance/scheduler.js';

/** What a schedule does with ticks missed while no worker fired them (see docs/api.md, "Schedules"). */
export type CatchUp = 'none' | 'latest' | { max: number };

/** The job fields a schedule's jobs get, as `enqueue` takes them. */
export interface ScheduleEnqueueOptions {
  priority?: number;
  maxAttempts?: number;
  orderingKey?: string;
  concurrencyKey?: string;
}

/** `lh.schedule(name, options)`: when (cron, zone), what (task or queue, payload) and how (job fields, catch-up). */
export interface ScheduleOptions {
  /** Cron expression (croner syntax: 5 fields, or 6 with seconds first; `@daily` and the like). */
  cron: string;
  /** IANA zone the cron is read in (default UTC), e.g. `Europe/Berlin`. */
  timezone?: string;
  /** The task to enqueue (its schema checks `payload` now); or give `queue`. */
  task?: AnyTask;
  /** The queue to enqueue to; or give `task`. */
  queue?: string;
  /** Every job's payload (default `{}`), checked by the task's schema and the size limit now. */
  payload?: unknown;
  /** Job fields of every job fired: priority, maxAttempts, orderingKey, concurrencyKey. */
  enqueueOptions?: ScheduleEnqueueOptions;
  /** Ticks missed while no worker ran: 'none', 'latest' (default) or `{ max: n }`. */
  catchUp?: CatchUp;
}

/** A schedule as `lh.schedules()` lists it. */
export interface ScheduleInfo {
  name: string;
  cron: string;
  /** The zone the cron is read in; null for UTC. */
  timezone: string | null;
  queue: string;
  /** The task's name when the schedule names a task; null for a plain queue. */
  task: string | null;
  payload: unknown;
  priority: number;
  maxAttempts: number;
  orderingKey: string | null;
  concurrencyKey: string | null;
  catchUp: CatchUp;
  paused: boolean;
  /** The next tick after now (database time); null while paused. */
  nextTickAt: Date | null;
  /** The newest tick handled (fired, or skipped by `catchUp`); null before the first. */
  lastTickAt: Date | null;
  /** The job of the newest fired tick still kept, if any. */
  lastJobId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

const SCHEDULE_OPTIONS: readonly (keyof ScheduleOptions)[] = [
  'cron',
  'timezone',
  'task',
  'queue',
  'payload',
  'enqueueOptions',
  'catchUp',
];
const JOB_OPTIONS: readonly (keyof ScheduleEnqueueOptions)[] = [
  'priority',
  'maxAttempts',
  'orderingKey',
  'concurrencyKey',
];
// Enqueue options a scheduled job cannot take, each with why.
const NOT_FOR_SCHEDULES: Record<string, string> = {
  runAt: 'a scheduled job is available at its tick; put the time in the cron',
  delayMs: 'a scheduled job is available at its tick; put the time in the cron',
  idempotencyKey: 'each tick enqueues exactly one job already',
  client: 'a schedule is stored by itself; its jobs are enqueued by the scheduler',
};
/** Same bound as enqueue's priority. */
/** Most schedules one `lh.schedules()` call lists. */
export const MAX_SCHEDULES_LISTED = 1000;

/** `lh.schedule`: creates or replaces a schedule, every field checked first (nothing written on a refusal). */
export async function schedule(
  context: LeaseholdContext,
  name: string,
  given: ScheduleOptions,
): Promise<ScheduleInfo> {
  const def = await scheduleDefinition(context, name, given);
  await upsertSchedule(context.pool, context.schema, def);
  return (await readSchedule(context, name)) as ScheduleInfo;
}

async function scheduleDefinition(
  context: LeaseholdContext,
  name: string,
  given: ScheduleOptions,
): Promise<ScheduleDefinition> {
  assertQueueName(name, 'name');
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new ValidationError('options', 'must be an object with at least cron and a task or queue');
  }
  rejectUnknownOptions(given, SCHEDULE_OPTIONS, 'options');
  const timezone = given.timezone === undefined ? null : given.timezone;
  (await loadTimetables()).compileTimetable(given.cron, timezone, 'cron');
  const target = scheduleTarget(given);
  const payload = given.payload === undefined ? {} : given.payload;
  const payloadJson = serialisePayload(payload, context.maxPayloadBytes, 'payload');
  if (target.task?.schema !== undefined) {
    await assertPayloadMatches(target.task.name, target.task.schema, payload, 'payload');
  }
  const job = optionsObject(given.enqueueOptions, 'enqueueOptions');
  for (const key of Object.keys(job)) {
    const why = NOT_FOR_SCHEDULES[key];
    if (why) throw new ValidationError(`enqueueOptions.${key}`, `is not taken by a schedule: ${why}`);
  }
  rejectUnknownOptions(job, JOB_OPTIONS, 'enqueueOptions');
  const catchUp = catchUpOf(given.catchUp);
  return {
    name,
    cron: given.cron,
    timezone,
    queue: target.queue,
    task: target.task?.name ?? null,
    payloadJson,
    priority: optionalInt(
      job.priority,
      'enqueueOptions.priority',
      -PRIORITY_LIMIT,
      PRIORITY_LIMIT,
      DEFAULT_PRIORITY,
    ),
    maxAttempts: optionalInt(
      job.maxAttempts,
      'enqueueOptions.maxAttempts',
      1,
      MAX_ATTEMPTS_LIMIT,
      DEFAULT_MAX_ATTEMPTS,
    ),
    orderingKey: optionalText(job.orderingKey, 'enqueueOptions.orderingKey', 200),
    concurrencyKey: optionalText(job.concurrencyKey, 'enqueueOptions.concurrencyKey', 200),
    ...catchUp,
  };
}

function scheduleTarget(given: ScheduleOptions): { queue: string; task: AnyTask | null } {
  if ((given.task === undefined) === (given.queue === undefined)) {
    throw new ValidationError('options', 'must name exactly one of task and queue');
  }
  if (given.queue !== undefined) {
    assertQueueName(given.queue, 'queue');
    return { queue: given.queue, task: null };
  }
  const task = given.task as AnyTask;
  if (typeof task !== 'object' || task === null || typeof task.name !== 'string' || !task.queue) {
    throw new ValidationError('task', 'must be a task made by defineTask');
  }
  return { queue: task.name, task };
}

function catchUpOf(value: unknown): Pick<ScheduleDefinition, 'catchUp' | 'catchUpMax'> {
  if (value === undefined || value === 'latest') return { catchUp: 'latest', catchUpMax: 1 };
  if (value === 'none') return { catchUp: 'none', catchUpMax: 1 };
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    rejectUnknownOptions(value, ['max'], 'catchUp');
    const max = assertInt((value as { max?: unknown }).max, 'catchUp.max', 1, MAX_CATCH_UP);
    return { catchUp: 'backfill', catchUpMax: max };
  }
  throw new ValidationError('catchUp', "must be 'none', 'latest' or { max: n }");
}

/** `lh.unschedule`: removes a schedule; false when there was none by that name. Jobs it fired stay. */
export async function unschedule(context: LeaseholdContext, name: string): Promise<boolean> {
  assertQueueName(name, 'name');
  return deleteSchedule(context.pool, context.schema, name);
}

/** `lh.pauseSchedule` / `lh.resumeSchedule`: a paused schedule fires nothing; resumed, it fires from now on. */
export async function setPaused(
  context: LeaseholdContext,
  name: string,
  paused: boolean,
): Promise<ScheduleInfo> {
  assertQueueName(name, 'name');
  if (!(await setSchedulePaused(context.pool, context.schema, name, paused))) {
    throw new ValidationError('name', `names no schedule (${JSON.stringify(name)})`);
  }
  return (await readSchedule(context, name)) as ScheduleInfo;
}

/** `lh.schedules()`: every schedule in name order (at most `limit`, default 1000), with next and last tick. */
export async function listSchedules(
  context: LeaseholdContext,
  given?: { limit?: number },
): Promise<ScheduleInfo[]> {
  const options = optionsObject(given);
  rejectUnknownOptions(options, ['limit'], 'options');
  const limit = optionalInt(options.limit, 'limit', 1, MAX_SCHEDULES_LISTED, MAX_SCHEDULES_LISTED);
  const rows = await listScheduleRows(context.pool, context.schema, { limit });
  const ticks = await loadTimetables();
  return rows.map((row) => toInfo(row, ticks));
}

/** One schedule by name; null when there is none. */
export async function readSchedule(context: LeaseholdContext, name: string): Promise<ScheduleInfo | null> {
  assertQueueName(name, 'name');
  const row = await readScheduleRow(context.pool, context.schema, name);
  return row ? toInfo(row, await loadTimetables()) : null;
}

/**
 * `lh.runSchedules()`: one scheduler pass now, as every worker runs each second: fires the due
 * ticks of every active schedule (exactly one job per tick, whoever else fires).
 */
export function runSchedules(context: LeaseholdContext): Promise<SchedulerResult> {
  return fireDueSchedules(context.pool, context.schema, { lateAfterMs: DEFAULT_SCHEDULE_LATE_AFTER_MS });
}

function toInfo(row: ScheduleRow, ticks: Awaited<ReturnType<typeof loadTimetables>>): ScheduleInfo {
  let nextTickAt: Date | null = null;
  if (!row.paused) {
    const after = ticksAfter(row);
    try {
      nextTickAt = ticks.nextTick(
        ticks.compileTimetable(row.cron, row.timezone),
        after.getTime() > row.db_now.getTime() ? after : row.db_now,
      );
    } catch {
      nextTickAt = null; // a zone this runtime does not know: listed, never fired here
    }
  }
  return {
    name: row.name,
    cron: row.cron,
    timezone: row.timezone,
    queue: row.queue_name,
    task: row.task_name,
    payload: row.payload,
    priority: row.priority,
    maxAttempts: row.max_attempts,
    orderingKey: row.ordering_key,
    concurrencyKey: row.concurrency_key,
    catchUp: row.catch_up === 'backfill' ? { max: row.catch_up_max } : row.catch_up,
    paused: row.paused,
    nextTickAt,
    lastTickAt: row.last_tick_at,
    lastJobId: row.last_job_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
