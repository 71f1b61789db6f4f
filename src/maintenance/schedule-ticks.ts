import { Cron } from 'croner';
import { ValidationError } from '../shared/errors.js';

/**
 * A schedule's timetable: which instants a cron expression names in a time zone. Cron syntax,
 * time-zone arithmetic and DST rules are croner's (https://croner.56k.guru); nothing here parses a
 * cron expression. Pure: every function takes the instant it reasons about ("now" is the
 * database's, read by the caller), so the timetable is tested without a clock.
 */

/** Longest cron expression accepted. */
export const MAX_CRON_LENGTH = 200;
/** Longest time-zone name accepted (IANA names are far shorter). */
export const MAX_TIMEZONE_LENGTH = 64;
// Most ticks one plan fires on time: a cron names at most one tick a second, so a window of a
// minute holds 61 at most; the bound only guards a window made larger.
const MAX_ON_TIME_TICKS = 600;

/** A compiled timetable (croner's `Cron`, never started: it only computes instants). */
export type Timetable = Cron;

const compiled = new Map<string, Timetable>();
const MAX_COMPILED = 1000;

/**
 * Compiles `cron` in `timezone` (null: UTC), checking both: a `ValidationError` on `cron` for an
 * expression croner refuses or one that names no future instant (e.g. 30 February), on `timezone`
 * for a zone the runtime does not know. Memoised.
 */
export function compileTimetable(cron: string, timezone: string | null, field = 'cron'): Timetable {
  if (typeof cron !== 'string' || cron.trim() === '' || cron.length > MAX_CRON_LENGTH) {
    throw new ValidationError(field, `must be a cron expression of at most ${MAX_CRON_LENGTH} characters`);
  }
  const key = `${timezone ?? ''}\0${cron}`;
  const known = compiled.get(key);
  if (known) return known;
  if (timezone !== null) assertTimezone(timezone);
  let timetable: Timetable;
  try {
    timetable = new Cron(cron, { timezone: timezone ?? 'UTC' });
  } catch (err) {
    throw new ValidationError(field, `is not a valid cron expression: ${(err as Error).message}`);
  }
  let next: Date | null;
  try {
    next = timetable.nextRun(new Date());
  } catch (err) {
    throw new ValidationError(field, `cannot be computed: ${(err as Error).message}`);
  }
  if (next === null) throw new ValidationError(field, 'names no instant in the future (it would never fire)');
  if (compiled.size >= MAX_COMPILED) compiled.clear();
  compiled.set(key, timetable);
  return timetable;
}

/** Throws `ValidationError` on `timezone` unless it is an IANA zone this runtime knows. */
export function assertTimezone(timezone: unknown, field = 'timezone'): asserts timezone is string {
  if (typeof timezone !== 'string' || timezone.length === 0 || timezone.length > MAX_TIMEZONE_LENGTH) {
    throw new ValidationError(field, `must be an IANA time zone name such as Europe/Berlin`);
  }
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw new ValidationError(
      field,
      'is not a time zone this runtime knows (an IANA name such as Europe/Berlin)',
    );
  }
}

/** The first tick strictly after `after`; null when the timetable names none. */
export function nextTick(timetable: Timetable, after: Date): Date | null {
  return timetable.nextRun(after);
}

/** How a schedule treats ticks missed while no process fired them. */
export type CatchUpRule = { mode: 'none' } | { mode: 'latest' } | { mode: 'backfill'; max: number };

/** What a scheduler pass does with one schedule. */
export interface TickPlan {
  /** Ticks to fire, oldest first. */
  fire: Date[];
  /** The newest due tick (fired or skipped): the schedule's next `last_tick_at`; null when none is due. */
  newest: Date | null;
}

/**
 * Plans one schedule at database time `now`: the ticks in (`after`, `now`] are due. A due tick at
 * most `lateAfterMs` old is on time and fires whatever the rule; an older one was missed (no process
 * fired it in time), and the catch-up rule decides: 'none' fires none of them, 'latest' fires the
 * newest missed tick only, 'backfill' the newest `max`. Every due tick counts as handled: `newest`
 * moves past the missed ticks left unfired, so they are never fired later.
 */
export function planTicks(
  timetable: Timetable,
  { after, now, lateAfterMs, catchUp }: { after: Date; now: Date; lateAfterMs: number; catchUp: CatchUpRule },
): TickPlan {
  const first = timetable.nextRun(after);
  if (first === null || first.getTime() > now.getTime()) return { fire: [], newest: null };
  const wanted = MAX_ON_TIME_TICKS + (catchUp.mode === 'backfill' ? catchUp.max : 1);
  // Newest first; previousRuns is strictly before its reference, and a tick at `now` is due.
  const due = timetable
    .previousRuns(wanted, new Date(now.getTime() + 1))
    .filter((tick) => tick.getTime() > after.getTime());
  const newest = due[0] ?? first;
  const lateBefore = now.getTime() - lateAfterMs;
  const onTime = due.filter((tick) => tick.getTime() >= lateBefore).slice(0, MAX_ON_TIME_TICKS);
  const missed = due.filter((tick) => tick.getTime() < lateBefore);
  const caught = catchUp.mode === 'none' ? [] : missed.slice(0, catchUp.mode === 'latest' ? 1 : catchUp.max);
  const fire = [...caught, ...onTime].sort((a, b) => a.getTime() - b.getTime());
  return { fire, newest };
}
