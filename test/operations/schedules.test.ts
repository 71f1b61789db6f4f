import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTask, isLeaseholdError, type ValidationError } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';

// Issue 15, schedules: the calls that keep the set of schedules (a table every process reads), and
// the checks made before anything is written.

const report = defineTask('sched-report', {
  schema: z.object({ day: z.enum(['mon', 'tue']) }),
  handler: async () => {},
});

async function refusal(promise: Promise<unknown>): Promise<ValidationError> {
  const err = await promise.catch((e: unknown) => e);
  expect(isLeaseholdError(err, 'VALIDATION')).toBe(true);
  return err as ValidationError;
}

describe('schedules: create, update, list, pause, resume, remove', () => {
  it('a schedule is created, listed with its next tick, updated in place, paused, resumed and removed', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const created = await lh.schedule('nightly', {
      cron: '0 30 2 * * *',
      timezone: 'Europe/Berlin',
      queue: 'reports',
      payload: { kind: 'nightly' },
      enqueueOptions: { priority: 5, maxAttempts: 3, orderingKey: 'r', concurrencyKey: 'c' },
      catchUp: { max: 4 },
    });
    const { rows } = await pool.query<{ now: Date }>('SELECT now() AS now');
    const dbNow = (rows[0] as { now: Date }).now;
    expect(created).toMatchObject({
      name: 'nightly',
      cron: '0 30 2 * * *',
      timezone: 'Europe/Berlin',
      queue: 'reports',
      task: null,
      payload: { kind: 'nightly' },
      priority: 5,
      maxAttempts: 3,
      orderingKey: 'r',
      concurrencyKey: 'c',
      catchUp: { max: 4 },
      paused: false,
      lastTickAt: null,
      lastJobId: null,
    });
    // Next 02:30 in Berlin: after now, within a day, and 02:30 local time.
    const next = created.nextTickAt as Date;
    expect(next.getTime()).toBeGreaterThan(dbNow.getTime() - 1000);
    expect(next.getTime() - dbNow.getTime()).toBeLessThanOrEqual(25 * 3_600_000);
    expect(next.toLocaleTimeString('en-GB', { timeZone: 'Europe/Berlin' })).toBe('02:30:00');

    const updated = await lh.schedule('nightly', { cron: '@hourly', task: report, payload: { day: 'mon' } });
    expect(updated).toMatchObject({
      cron: '@hourly',
      timezone: null,
      queue: 'sched-report',
      task: 'sched-report',
      priority: 0,
      maxAttempts: 8,
      orderingKey: null,
      catchUp: 'latest',
    });
    expect((updated.nextTickAt as Date).getUTCMinutes()).toBe(0);
    await lh.schedule('another', { cron: '* * * * *', queue: 'q', catchUp: 'none' });
    expect((await lh.schedules()).map((s) => [s.name, s.catchUp])).toEqual([
      ['another', 'none'],
      ['nightly', 'latest'],
    ]);

    const paused = await lh.pauseSchedule('nightly');
    expect(paused).toMatchObject({ paused: true, nextTickAt: null });
    expect((await lh.schedules()).find((s) => s.name === 'nightly')?.paused).toBe(true);
    const resumed = await lh.resumeSchedule('nightly');
    expect(resumed.paused).toBe(false);
    expect(resumed.nextTickAt).toBeInstanceOf(Date);

    expect(await lh.unschedule('nightly')).toBe(true);
    expect(await lh.unschedule('nightly')).toBe(false);
    expect((await lh.schedules()).map((s) => s.name)).toEqual(['another']);
    expect((await refusal(lh.pauseSchedule('nightly'))).message).toMatch(/names no schedule/);
  });

  it('bad input is a ValidationError naming the field, and nothing is written', async () => {
    const lh = await migratedClient();
    const base = { cron: '* * * * *', queue: 'q' };
    const cases: [unknown, unknown, string][] = [
      ['bad name!', base, 'name'],
      ['x'.repeat(129), base, 'name'],
      ['s', { ...base, cron: 'every minute' }, 'cron'],
      ['s', { ...base, cron: '61 * * * *' }, 'cron'],
      ['s', { ...base, cron: '0 0 30 2 *' }, 'cron'], // 30 February never comes
      ['s', { ...base, cron: `${'* '.repeat(150)}` }, 'cron'],
      ['s', { ...base, timezone: 'Mars/Olympus' }, 'timezone'],
      ['s', { ...base, timezone: 42 }, 'timezone'],
      ['s', { cron: '* * * * *' }, 'options'],
      ['s', { ...base, task: report }, 'options'],
      ['s', { ...base, queue: 'bad queue' }, 'queue'],
      ['s', { ...base, crn: '* * * * *' }, 'options.crn'],
      ['s', { ...base, payload: { big: 'x'.repeat(300 * 1024) } }, 'payload'],
      ['s', { ...base, enqueueOptions: { priority: 'high' } }, 'enqueueOptions.priority'],
      ['s', { ...base, enqueueOptions: { runAt: new Date() } }, 'enqueueOptions.runAt'],
      ['s', { ...base, enqueueOptions: { idempotencyKey: 'k' } }, 'enqueueOptions.idempotencyKey'],
      ['s', { ...base, enqueueOptions: { prio: 1 } }, 'enqueueOptions.prio'],
      ['s', { ...base, catchUp: 'all' }, 'catchUp'],
      ['s', { ...base, catchUp: { max: 0 } }, 'catchUp.max'],
      ['s', { ...base, catchUp: { max: 1001 } }, 'catchUp.max'],
      ['s', { cron: '* * * * *', task: report, payload: { day: 'sun' } }, 'payload'],
    ];
    for (const [name, options, field] of cases) {
      const err = await refusal(lh.schedule(name as string, options as never));
      expect(err.field, JSON.stringify(options).slice(0, 80)).toBe(field);
    }
    expect((await refusal(lh.schedule('s', { ...base, timezone: 'Mars/Olympus' }))).message).toMatch(
      /time zone/,
    );
    expect(await lh.schedules()).toEqual([]);
    // The task's schema accepts what it should.
    await lh.schedule('ok', { cron: '* * * * *', task: report, payload: { day: 'tue' } });
    expect((await lh.schedules()).map((s) => s.name)).toEqual(['ok']);
  });
});
