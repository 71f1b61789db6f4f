import { describe, expect, it } from 'vitest';
import { isLeaseholdError } from '../../src/index.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { roleClient } from '../support/roles.js';
import { started } from '../support/worker.js';

// Issue 15, schedules under the per-schema roles of 016 (issue 17): the producer and worker roles
// read which schedule made a job, and the schedules without their payloads; the admin keeps and
// fires schedules; a worker role, which may not enqueue (nor fire: a fire inserts jobs with ticks
// the caller computed), reports one PermissionError and turns its scheduler off.

describe('schedules and the per-schema roles', () => {
  it('producer and worker read a scheduled job with its schedule (never its payload); the admin schedules and fires', async () => {
    const owner = await migratedClient();
    const admin = await roleClient(owner.schema, 'admin');
    await admin.schedule('roles-every-second', {
      cron: '* * * * * *',
      queue: 'roles-sched',
      payload: { secret: 'schedule-canary' },
    });
    await testPool(1).query(
      `UPDATE "${owner.schema}".schedules SET fire_after = now() - interval '2 seconds'`,
    );
    const { fired } = await admin.runSchedules();
    expect(fired.length).toBeGreaterThanOrEqual(2);
    const first = fired[0]!;
    expect((await admin.schedules())[0]?.payload).toEqual({ secret: 'schedule-canary' });
    for (const kind of ['producer', 'worker'] as const) {
      const client = await roleClient(owner.schema, kind);
      const job = await client.getJob(first.jobId, { history: true });
      expect(job?.schedule, kind).toEqual({ name: 'roles-every-second', tickAt: first.tickAt });
      expect(job?.payload, kind).toBeNull();
      const schedules = await client.schedules();
      expect(schedules.map((s) => s.name)).toEqual(['roles-every-second']);
      expect(schedules[0]?.payload, kind).toBeNull();
      // And it may neither fire (with ticks due again) nor change them.
      await testPool(1).query(
        `UPDATE "${owner.schema}".schedules SET fire_after = now() - interval '2 seconds', last_tick_at = NULL`,
      );
      const err = await client.runSchedules().then(
        () => null,
        (e: unknown) => e,
      );
      expect(isLeaseholdError(err, 'PERMISSION_DENIED'), kind).toBe(true);
      await expect(client.unschedule('roles-every-second')).rejects.toMatchObject({
        code: 'PERMISSION_DENIED',
      });
      await expect(client.pauseSchedule('roles-every-second')).rejects.toMatchObject({
        code: 'PERMISSION_DENIED',
      });
    }
    expect(await admin.unschedule('roles-every-second')).toBe(true);
  });

  it("a worker under the schema's worker role reports once that it may not fire schedules, and fires none", async () => {
    const owner = await migratedClient();
    await owner.schedule('roles-denied', { cron: '* * * * * *', queue: 'roles-denied' });
    await testPool(1).query(
      `UPDATE "${owner.schema}".schedules SET fire_after = now() - interval '3 seconds'`,
    );
    const asWorker = await roleClient(owner.schema, 'worker');
    const errors: unknown[] = [];
    const worker = asWorker.worker({
      queues: { 'roles-denied': async () => {} },
      scheduleIntervalMs: 20,
      recoveryIntervalMs: 0,
      agingPassIntervalMs: 0,
    });
    worker.on('error', (err) => errors.push(err));
    await started(worker);
    await waitFor(() => errors.length > 0, { what: 'the scheduler to report its permission error' });
    await worker.stop();
    expect(errors).toHaveLength(1); // retired: not once per pass
    expect(isLeaseholdError(errors[0], 'PERMISSION_DENIED')).toBe(true);
    expect((errors[0] as Error).message).toMatch(
      /^schedules are not fired by this process: .*scheduleIntervalMs: 0/,
    );
    expect((await owner.schedules())[0]?.lastTickAt).toBeNull();
  });
});
