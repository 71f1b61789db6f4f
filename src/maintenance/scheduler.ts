import {
  DEFAULT_SCHEDULE_LATE_AFTER_MS,
  DEFAULT_SCHEDULE_TICK_PRUNE_INTERVAL_MS,
  DEFAULT_SCHEDULE_TICKS_KEPT,
} from '../shared/defaults.js';
import { isLeaseholdError, PermissionError } from '../shared/errors.js';
import type { Queryable } from '../storage/db.js';
import { fireScheduleTicks, pruneScheduleTicks } from '../storage/schedules/schedule-fire.js';
import { listScheduleRows, type ScheduleRow } from '../storage/schedules/schedules.js';
import { type MaintenanceServiceOptions, PeriodicService } from './periodic-service.js';
import type { CatchUpRule } from './schedule-ticks.js';
import { loadTimetables } from './timetables.js';

export {
  DEFAULT_SCHEDULE_INTERVAL_MS,
  DEFAULT_SCHEDULE_LATE_AFTER_MS,
  DEFAULT_SCHEDULE_TICKS_KEPT,
} from '../shared/defaults.js';

/** Schedules read per statement of a pass. */
const SCHEDULE_PAGE = 500;
/** Most schedules one pass looks at; the rest wait for the next pass (name order). */
const MAX_SCHEDULES_PER_PASS = 10_000;
/** Most tick rows one prune statement removes per schedule. */
const TICK_PRUNE_LIMIT = 1000;

/** One job a schedule fired: which schedule, for which tick (database time), which job. */
export interface ScheduledJob {
  schedule: string;
  tickAt: Date;
  jobId: string;
}

/** What one scheduler pass did. */
export interface SchedulerResult {
  /** Jobs enqueued by this pass, one per tick it fired. */
  fired: ScheduledJob[];
  /** Schedules whose ticks another process fired first (or that changed meanwhile): nothing done. */
  raced: number;
}

/** Settings of one pass. */
export interface SchedulePassOptions {
  /** A due tick older than this (ms) was missed: `catchUp` decides (default 60 s). */
  lateAfterMs?: number;
  /**
   * The instant the pass reasons at, instead of each page's database now(). Only for tests of the
   * timetable on a fixed date (DST nights); never set by the library.
   */
  at?: Date;
  /** A schedule that could not be fired (the others go on); without it, the first such error is thrown at the end. */
  onScheduleError?: (name: string, err: unknown) => void;
}

/** The catch-up rule stored on a schedule row. */
export function catchUpRule(row: Pick<ScheduleRow, 'catch_up' | 'catch_up_max'>): CatchUpRule {
  return row.catch_up === 'backfill' ? { mode: 'backfill', max: row.catch_up_max } : { mode: row.catch_up };
}

/** The instant after which a schedule's ticks are due: its last tick, or when it (re)started. */
export function ticksAfter(row: Pick<ScheduleRow, 'last_tick_at' | 'fire_after'>): Date {
  const last = row.last_tick_at;
  return last !== null && last.getTime() > row.fire_after.getTime() ? last : row.fire_after;
}

/**
 * One scheduler pass: reads the active schedules (paged, bounded) with the database's now(), plans
 * each one's due ticks (schedule-ticks.ts) and fires those that have any, each with one ScheduleFire
 * statement (the tick rows and their jobs together, exactly once per tick whoever else fires).
 * Every process may run passes at once: the statement, not the pass, decides.
 */
export async function fireDueSchedules(
  db: Queryable,
  schema: string,
  options: SchedulePassOptions = {},
): Promise<SchedulerResult> {
  const lateAfterMs = options.lateAfterMs ?? DEFAULT_SCHEDULE_LATE_AFTER_MS;
  const result: SchedulerResult = { fired: [], raced: 0 };
  let firstError: unknown = null;
  let after = '';
  for (let seen = 0; seen < MAX_SCHEDULES_PER_PASS; ) {
    const rows = await listScheduleRows(db, schema, { after, limit: SCHEDULE_PAGE, activeOnly: true });
    for (const row of rows) {
      try {
        await fireOne(db, schema, row, options.at ?? row.db_now, lateAfterMs, result);
      } catch (err) {
        if (isLeaseholdError(err, 'PERMISSION_DENIED')) throw err;
        if (options.onScheduleError) options.onScheduleError(row.name, err);
        else firstError ??= err;
      }
    }
    seen += rows.length;
    if (rows.length < SCHEDULE_PAGE) break;
    after = (rows.at(-1) as ScheduleRow).name;
  }
  if (firstError !== null) throw firstError;
  return result;
}

async function fireOne(
  db: Queryable,
  schema: string,
  row: ScheduleRow,
  now: Date,
  lateAfterMs: number,
  result: SchedulerResult,
): Promise<void> {
  const { compileTimetable, planTicks } = await loadTimetables();
  const timetable = compileTimetable(row.cron, row.timezone);
  const plan = planTicks(timetable, { after: ticksAfter(row), now, lateAfterMs, catchUp: catchUpRule(row) });
  if (plan.newest === null) return;
  const outcome = await fireScheduleTicks(
    db,
    schema,
    { name: row.name, revision: row.revision, lastTickAt: row.last_tick_at },
    plan.newest,
    plan.fire,
  );
  if (!outcome.advanced) result.raced++;
  for (const fired of outcome.fired) result.fired.push({ schedule: row.name, ...fired });
}

/** Options of the scheduler service. */
export interface SchedulerServiceOptions extends MaintenanceServiceOptions {
  /** Called after a pass that enqueued something. */
  onFired?: (result: SchedulerResult) => void;
  /** A due tick older than this (ms) was missed (default 60 s). */
  lateAfterMs?: number;
  /** Ticks kept per schedule as its jobs' history (default 10,000); older ones are pruned. */
  ticksKept?: number;
}

/**
 * Fires schedules on a short jittered timer (default every second), in every worker process: no
 * leader, since ScheduleFire makes each tick's job exactly once however many passes race. Every
 * minute or so it also prunes the tick rows of the schedules it fired beyond the newest
 * `ticksKept`. A process whose database role may not enqueue (leasehold_worker) reports that once,
 * as a `PermissionError`, and turns its scheduler off instead of failing every interval.
 */
export class SchedulerService extends PeriodicService<SchedulerResult> {
  readonly #firedSincePrune = new Set<string>();
  #lastPruneAt = 0;

  constructor(private readonly options: SchedulerServiceOptions) {
    super(options.intervalMs, options.onError);
  }

  /** Runs one pass now. */
  override async runOnce(): Promise<SchedulerResult> {
    const { db, schema } = this.options;
    let result: SchedulerResult;
    try {
      result = await fireDueSchedules(db, schema, {
        lateAfterMs: this.options.lateAfterMs,
        onScheduleError: (name, err) =>
          this.options.onError?.(new Error(`schedule ${name} could not be fired`, { cause: err })),
      });
    } catch (err) {
      if (isLeaseholdError(err, 'PERMISSION_DENIED')) {
        this.retire();
        throw new PermissionError(
          `schedules are not fired by this process: its database role may not enqueue (${err.message.split(';')[0]}). ` +
            'Fire schedules from workers connected as the owner or leasehold_admin, and set scheduleIntervalMs: 0 ' +
            'on workers that run as leasehold_worker',
          err,
        );
      }
      throw err;
    }
    for (const fired of result.fired) this.#firedSincePrune.add(fired.schedule);
    // Reported before the housekeeping below: the jobs are claimable from the fire's commit, and a
    // worker could run them while a slow prune held this pass (the event came after the jobs ran).
    if (result.fired.length > 0) this.options.onFired?.(result);
    // Pruning cadence only (no schedule decision rides on it): the process clock is fine here.
    if (Date.now() - this.#lastPruneAt >= DEFAULT_SCHEDULE_TICK_PRUNE_INTERVAL_MS) {
      this.#lastPruneAt = Date.now();
      const names = [...this.#firedSincePrune];
      this.#firedSincePrune.clear();
      for (const name of names) {
        await pruneScheduleTicks(
          db,
          schema,
          name,
          this.options.ticksKept ?? DEFAULT_SCHEDULE_TICKS_KEPT,
          TICK_PRUNE_LIMIT,
        );
      }
    }
    return result;
  }
}
