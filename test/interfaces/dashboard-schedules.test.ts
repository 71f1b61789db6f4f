import { describe, expect, it } from 'vitest';
import { startDashboard } from '../../src/index.js';
import { migratedClient, testPool } from '../support/db.js';

// Issue 15: the dashboard's overview lists schedules with their next and last tick (from the same
// lh.schedules() the CLI uses), without payloads; a job page says which schedule and tick made it.

describe('the dashboard and schedules', () => {
  it('the overview lists each schedule with next and last tick and its last job, never its payload', async () => {
    const lh = await migratedClient();
    await lh.schedule('dash-every-second', {
      cron: '* * * * * *',
      queue: 'dash-sched',
      payload: { secret: 'not-on-the-page' },
    });
    await lh.schedule('dash-paused', { cron: '@daily', queue: 'dash-sched', timezone: 'Europe/Berlin' });
    await lh.pauseSchedule('dash-paused');
    await testPool(1).query(
      `UPDATE "${lh.schema}".schedules SET fire_after = now() - interval '2 seconds' WHERE name = 'dash-every-second'`,
    );
    const { fired } = await lh.runSchedules();
    const last = fired.at(-1)!;
    const dashboard = await startDashboard(lh, { port: 0 });
    try {
      const answer = await fetch(`${dashboard.url}/api/overview`);
      expect(answer.status).toBe(200);
      const text = await answer.text();
      expect(text).not.toContain('not-on-the-page');
      const { schedules } = JSON.parse(text);
      expect(schedules).toEqual([
        expect.objectContaining({ name: 'dash-every-second', paused: false, lastJobId: expect.any(String) }),
        expect.objectContaining({ name: 'dash-paused', paused: true, nextTickAt: null, lastTickAt: null }),
      ]);
      expect(schedules[0].payload).toBeUndefined();
      expect(new Date(schedules[0].lastTickAt).getTime()).toBeGreaterThanOrEqual(last.tickAt.getTime());
      expect(new Date(schedules[0].nextTickAt).getTime()).toBeGreaterThan(
        new Date(schedules[0].lastTickAt).getTime(),
      );
      const job = (await (await fetch(`${dashboard.url}/api/jobs/${last.jobId}`)).json()) as {
        job: { schedule: unknown };
      };
      expect(job.job.schedule).toEqual({ name: 'dash-every-second', tickAt: last.tickAt.toISOString() });
    } finally {
      await dashboard.close();
    }
  });
});
