import { describe, expect, it } from 'vitest';
import { isLeaseholdError } from '../../src/index.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { clientAs } from '../support/roles.js';
import { started } from '../support/worker.js';

// Issue 15, schedules under the group roles of 006 (see 012's grants): every role reads which
// schedule made a job; the admin keeps and fires schedules; a worker role, which may not enqueue,
// reports one PermissionError and turns its scheduler off.

describe('schedules and the group roles', () => {
  it('producer and worker read a scheduled job with its schedule; the admin schedules and fires', async () => {
    const owner = await migratedClient();
    const admin = await clientAs(['leasehold_admin'], owner.schema);
    await admin.schedule('roles-every-second', { cron: '* * * * * *', queue: 'roles-sched' });
    await testPool(1).query(
      `UPDATE "${owner.schema}".schedules SET fire_after = now() - interval '2 seconds'`,
    );
    const { fired } = await admin.runSchedules();
    expect(fired.length).toBeGreaterThanOrEqual(2);
    const first = fired[0]!;
    for (const groups of [['leasehold_producer'], ['leasehold_worker']] as const) {
      const client = await clientAs([...groups], owner.schema);
      const job = await client.getJob(first.jobId, { history: true });
      expect(job?.schedule, groups[0]).toEqual({ name: 'roles-every-second', tickAt: first.tickAt });
      expect((await client.schedules()).map((s) => s.name)).toEqual(['roles-every-second']);
    }
    expect(await admin.unschedule('roles-every-second')).toBe(true);
  });

  it('a worker under leasehold_worker reports once that it may not fire schedules, and fires none', async () => {
    const owner = await migratedClient();
    await owner.schedule('roles-denied', { cron: '* * * * * *', queue: 'roles-denied' });
    await testPool(1).query(
      `UPDATE "${owner.schema}".schedules SET fire_after = now() - interval '3 seconds'`,
    );
    const asWorker = await clientAs(['leasehold_worker'], owner.schema);
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
