// The timetable module brings croner, the cron parser: only schedules need it, so it is imported on
// the first schedule call or scheduler pass, never by `import 'leasehold'` itself.

/** Most missed ticks `catchUp: { max }` backfills in one go. */
export const MAX_CATCH_UP = 1000;

let loading: Promise<typeof import('./schedule-ticks.js')> | null = null;

/** The timetable functions of `schedule-ticks.ts`, imported (with croner) once, on first use. */
export function loadTimetables(): Promise<typeof import('./schedule-ticks.js')> {
  loading ??= import('./schedule-ticks.js');
  return loading;
}
