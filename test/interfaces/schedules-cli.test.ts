import { describe, expect, it } from 'vitest';
import type { AdminFlags } from '../../src/cli/admin.js';
import { closeContext, type LeaseholdContext, resolveContext } from '../../src/context/context.js';
import { schedule } from '../../src/operations/producer/schedules.js';
import { runCliInProcess } from '../support/cli-inprocess.js';
import { migratedClient, testPool } from '../support/db.js';

// Issue 15: `leasehold schedules list|pause|resume|remove`, with --json, on a context handed in
// (as test/interfaces/cli-context.test.ts runs the other admin commands).

describe('leasehold schedules', () => {
  it('lists, pauses, resumes and removes schedules, as text and as JSON, never printing payloads', async () => {
    const { schema } = await migratedClient();
    const context = resolveContext({ pool: testPool(2), schema });
    const openContext = (_flags: AdminFlags): LeaseholdContext => context;
    const nowhere = ['--database-url', 'postgres://nobody@nowhere.invalid:1/none'];
    const cli = (args: string[]) => runCliInProcess([...args, ...nowhere], { openContext });
    try {
      expect(await cli(['schedules', 'list'])).toMatchObject({ code: 0, stdout: 'no schedules yet\n' });
      await schedule(context, 'nightly', {
        cron: '0 30 2 * * *',
        timezone: 'Europe/Berlin',
        queue: 'reports',
        payload: { secret: 'do-not-print' },
      });
      await schedule(context, 'minutely', { cron: '* * * * *', queue: 'pings', catchUp: 'none' });

      const listed = await cli(['schedules', 'list', '--json']);
      expect(listed.code).toBe(0);
      expect(listed.stdout).not.toContain('do-not-print');
      const rows = JSON.parse(listed.stdout);
      expect(rows).toEqual([
        expect.objectContaining({
          name: 'minutely',
          cron: '* * * * *',
          queue: 'pings',
          catchUp: 'none',
          paused: false,
        }),
        expect.objectContaining({
          name: 'nightly',
          timezone: 'Europe/Berlin',
          catchUp: 'latest',
          lastTickAt: null,
        }),
      ]);
      expect(rows[1]).not.toHaveProperty('payload');
      expect(new Date(rows[1].nextTickAt).toLocaleTimeString('en-GB', { timeZone: 'Europe/Berlin' })).toBe(
        '02:30:00',
      );
      const text = await cli(['schedules', 'list']);
      expect(text.stdout).toMatch(/^schedule\s+cron\s+zone\s+enqueues to\s+next tick\s+last tick\s+last job/);
      expect(text.stdout).toMatch(/nightly\s+0 30 2 \* \* \*\s+Europe\/Berlin\s+queue reports/);
      expect(text.stdout).not.toContain('do-not-print');

      expect(await cli(['schedules', 'pause', 'nightly'])).toMatchObject({
        code: 0,
        stdout: 'schedule nightly paused: no ticks fire until `leasehold schedules resume nightly`\n',
      });
      const pausedJson = JSON.parse((await cli(['schedules', 'pause', 'minutely', '--json'])).stdout);
      expect(pausedJson).toMatchObject({ name: 'minutely', paused: true, nextTickAt: null });
      expect(pausedJson).not.toHaveProperty('payload');
      expect(
        JSON.parse((await cli(['schedules', 'list', '--json'])).stdout).map(
          (s: { paused: boolean }) => s.paused,
        ),
      ).toEqual([true, true]);
      const resumed = await cli(['schedules', 'resume', 'nightly']);
      expect(resumed.stdout).toMatch(/^schedule nightly resumed: next tick \d{4}-\d\d-\d\d/);
      expect(JSON.parse((await cli(['schedules', 'resume', 'minutely', '--json'])).stdout)).toMatchObject({
        paused: false,
      });

      expect(await cli(['schedules', 'remove', 'nightly'])).toMatchObject({
        code: 0,
        stdout: 'schedule nightly removed\n',
      });
      expect(JSON.parse((await cli(['schedules', 'remove', 'minutely', '--json'])).stdout)).toEqual({
        name: 'minutely',
        removed: true,
      });
      expect(await cli(['schedules', 'list', '--json'])).toMatchObject({ code: 0, stdout: '[]\n' });

      const missing = await cli(['schedules', 'pause', 'nightly']);
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain('no schedule nightly');
      const gone = await cli(['schedules', 'remove', 'nightly']);
      expect(gone.code).not.toBe(0);
      expect(gone.stderr).toContain('no schedule nightly');
    } finally {
      await closeContext(context);
    }
  });
});
