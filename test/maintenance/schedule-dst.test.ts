import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { compileTimetable, planTicks } from '../../src/maintenance/schedule-ticks.js';
import { fireDueSchedules } from '../../src/maintenance/scheduler.js';
import { migratedClient, testPool } from '../support/db.js';

// Issue 15, schedules across DST in Europe/Berlin (2026: clocks go forward at 02:00 CET on 29 March,
// back at 03:00 CEST on 25 October). The rule is croner's, documented in its README ("DST handling",
// as Vixie cron): a fixed-time job whose time occurs twice runs once, at the first occurrence; one
// whose time does not exist runs at the first valid time after the gap, the same day; an interval
// job (wildcard, step, range or list in its time fields) runs on both occurrences of a repeated hour
// and skips times in a gap. The timetable is pure, so most of this needs no clock; the last test
// fires through the database with the pass's instant set on those nights.

const berlin = (cron: string) => compileTimetable(cron, 'Europe/Berlin');
const iso = (dates: Date[]) => dates.map((d) => d.toISOString());
const backfillAll = { mode: 'backfill', max: 1000 } as const;

describe('schedules across daylight saving time in Europe/Berlin', () => {
  it('autumn: 02:30, which the night names twice, fires once (at its first occurrence, CEST)', () => {
    const plan = planTicks(berlin('0 30 2 * * *'), {
      after: new Date('2026-10-24T12:00:00Z'),
      now: new Date('2026-10-26T12:00:00Z'), // past both 02:30s of the 25th and the 26th's
      lateAfterMs: 60_000,
      catchUp: backfillAll,
    });
    expect(iso(plan.fire)).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);
  });

  it('spring: 02:30, which the night skips, fires at 03:00 CEST, the first valid time after the gap', () => {
    const plan = planTicks(berlin('0 30 2 * * *'), {
      after: new Date('2026-03-28T12:00:00Z'),
      now: new Date('2026-03-30T12:00:00Z'),
      lateAfterMs: 60_000,
      catchUp: backfillAll,
    });
    expect(iso(plan.fire)).toEqual(['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']);
  });

  it('an interval cron runs through the repeated hour on both occurrences and skips the missing one', () => {
    const autumn = planTicks(berlin('0 */30 * * * *'), {
      after: new Date('2026-10-24T23:45:00Z'), // 01:45 CEST
      now: new Date('2026-10-25T02:15:00Z'), // 03:15 CET
      lateAfterMs: 60_000,
      catchUp: backfillAll,
    });
    // 02:00 and 02:30 CEST, then 02:00 and 02:30 CET, then 03:00 CET: every half hour of real time.
    expect(iso(autumn.fire)).toEqual([
      '2026-10-25T00:00:00.000Z',
      '2026-10-25T00:30:00.000Z',
      '2026-10-25T01:00:00.000Z',
      '2026-10-25T01:30:00.000Z',
      '2026-10-25T02:00:00.000Z',
    ]);
    const spring = planTicks(berlin('0 */30 * * * *'), {
      after: new Date('2026-03-29T00:45:00Z'), // 01:45 CET
      now: new Date('2026-03-29T01:45:00Z'), // 03:45 CEST
      lateAfterMs: 60_000,
      catchUp: backfillAll,
    });
    // 01:59:59 CET is followed by 03:00 CEST: nothing is named at 02:00 or 02:30.
    expect(iso(spring.fire)).toEqual(['2026-03-29T01:00:00.000Z', '2026-03-29T01:30:00.000Z']);
  });

  it('on time versus missed: ticks within lateAfterMs always fire, older ones follow catchUp', () => {
    const everySecond = compileTimetable('* * * * * *', null);
    const now = new Date('2026-01-01T00:10:00.500Z');
    const after = new Date('2026-01-01T00:00:00Z'); // ten minutes of ticks are due
    const plan = (catchUp: Parameters<typeof planTicks>[1]['catchUp']) =>
      planTicks(everySecond, { after, now, lateAfterMs: 5000, catchUp });
    // On time: at most 5 s old at 00:10:00.5, so from 00:09:56 on.
    const onTime = ['09:56', '09:57', '09:58', '09:59', '10:00'].map((t) => `2026-01-01T00:${t}.000Z`);
    expect(iso(plan({ mode: 'none' }).fire)).toEqual(onTime);
    expect(iso(plan({ mode: 'latest' }).fire)).toEqual(['2026-01-01T00:09:55.000Z', ...onTime]);
    expect(iso(plan({ mode: 'backfill', max: 2 }).fire)).toEqual([
      '2026-01-01T00:09:54.000Z',
      '2026-01-01T00:09:55.000Z',
      ...onTime,
    ]);
    for (const mode of ['none', 'latest'] as const) {
      expect(plan({ mode }).newest?.toISOString()).toBe('2026-01-01T00:10:00.000Z');
    }
    // Nothing due: no plan at all.
    expect(
      planTicks(everySecond, { after: now, now, lateAfterMs: 5000, catchUp: { mode: 'latest' } }),
    ).toEqual({
      fire: [],
      newest: null,
    });
  });

  it('fired through the database on those nights, each local 02:30 makes one job at the instant croner names', async () => {
    const lh = await migratedClient();
    const pool: pg.Pool = testPool(1);
    await lh.schedule('berlin-night', {
      cron: '0 30 2 * * *',
      timezone: 'Europe/Berlin',
      queue: 'sched-dst',
      catchUp: { max: 10 },
    });
    const fire = async (from: string, at: string) => {
      await pool.query(
        `UPDATE "${lh.schema}".schedules SET fire_after = $1, last_tick_at = NULL WHERE name = 'berlin-night'`,
        [new Date(from)],
      );
      // Twice at the same instant, and once more later in the night: still one job per tick.
      const first = await fireDueSchedules(lh.pool, lh.schema, { at: new Date(at) });
      const second = await fireDueSchedules(lh.pool, lh.schema, { at: new Date(at) });
      await pool.query(`UPDATE "${lh.schema}".schedules SET last_tick_at = NULL WHERE name = 'berlin-night'`);
      const third = await fireDueSchedules(lh.pool, lh.schema, { at: new Date(at) });
      return [first, second, third].flatMap((r) => r.fired);
    };
    // Autumn: at 02:45 CET, after both 02:30s (00:30Z and 01:30Z).
    const autumn = await fire('2026-10-24T12:00:00Z', '2026-10-25T01:45:00Z');
    expect(autumn.map((f) => f.tickAt.toISOString())).toEqual(['2026-10-25T00:30:00.000Z']);
    // Spring: at 04:00 CEST, after the gap.
    const spring = await fire('2026-03-28T12:00:00Z', '2026-03-29T02:00:00Z');
    expect(spring.map((f) => f.tickAt.toISOString())).toEqual(['2026-03-29T01:00:00.000Z']);
    const job = await lh.getJob(autumn[0]!.jobId);
    expect(job?.schedule).toEqual({ name: 'berlin-night', tickAt: new Date('2026-10-25T00:30:00Z') });
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE queue_name = 'sched-dst'`,
    );
    expect(rows[0]?.n).toBe(2);
  });
});
