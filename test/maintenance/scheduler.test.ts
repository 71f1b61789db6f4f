import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Leasehold, SchedulerResult } from '../../src/index.js';
import { fireDueSchedules, SchedulerService } from '../../src/maintenance/scheduler.js';
import { runUnnamedOnPool } from '../../src/storage/db.js';
import { migratedClient, pooled, testPool, uniqueSchema, waitFor } from '../support/db.js';

// Issue 15, schedules: firing. Every worker may fire; each tick enqueues exactly one job whatever
// races, restarts or outages there were, and the job records which schedule and tick made it.
// Outages are simulated in database time (moving a schedule's last tick back), never slept through.

async function dbNow(pool: pg.Pool): Promise<Date> {
  const { rows } = await pool.query<{ now: Date }>('SELECT now() AS now');
  return (rows[0] as { now: Date }).now;
}

/** Makes the schedule's ticks after `seconds` ago due, as if no worker had run since. */
async function rewind(pool: pg.Pool, schema: string, name: string, interval: string): Promise<void> {
  await pool.query(
    `UPDATE "${schema}".schedules SET fire_after = now() - $2::interval, last_tick_at = NULL WHERE name = $1`,
    [name, interval],
  );
}

/** Every fired tick of a schedule with the number of jobs that carry it. */
async function jobsPerTick(pool: pg.Pool, schema: string, name: string) {
  const { rows } = await pool.query<{ tick_at: Date; jobs: number; ticks: number }>(
    `SELECT t.tick_at, count(j.id)::int AS jobs, count(*)::int AS ticks
     FROM "${schema}".schedule_ticks AS t LEFT JOIN "${schema}".jobs AS j ON j.id = t.job_id
     WHERE t.schedule_name = $1 GROUP BY t.tick_at ORDER BY t.tick_at`,
    [name],
  );
  return rows;
}

async function jobCount(pool: pg.Pool, schema: string, queue: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${schema}".jobs WHERE queue_name = $1`,
    [queue],
  );
  return (rows[0] as { n: number }).n;
}

describe('the scheduler', () => {
  it('fires each due tick once, as a job carrying the schedule, the tick and the stored job fields', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.schedule('every-second', {
      cron: '* * * * * *',
      queue: 'sched-a',
      payload: { hello: 'tick' },
      enqueueOptions: { priority: 7, maxAttempts: 2 },
    });
    await rewind(pool, lh.schema, 'every-second', '5 seconds');
    const first = await lh.runSchedules();
    expect(first.fired.length).toBeGreaterThanOrEqual(5);
    expect(first.fired.length).toBeLessThanOrEqual(7);
    const ticks = first.fired.map((f) => f.tickAt.getTime());
    expect(ticks).toEqual([...ticks].sort((a, b) => a - b));
    for (const t of ticks) expect(t % 1000).toBe(0);

    const job = await lh.getJob(first.fired[0]!.jobId);
    expect(job).toMatchObject({
      queueName: 'sched-a',
      payload: { hello: 'tick' },
      priority: 7,
      maxAttempts: 2,
      status: 'pending',
      schedule: { name: 'every-second', tickAt: first.fired[0]!.tickAt },
    });
    const withHistory = await lh.getJob(first.fired[0]!.jobId, { history: true });
    expect(withHistory?.schedule).toEqual({ name: 'every-second', tickAt: first.fired[0]!.tickAt });
    // A job no schedule made says nothing of schedules.
    const { id } = await lh.enqueue('sched-a', {});
    expect(await lh.getJob(id)).not.toHaveProperty('schedule');

    const listed = (await lh.schedules())[0];
    expect(listed?.lastTickAt).toEqual(first.fired.at(-1)?.tickAt);
    expect(listed?.lastJobId).toBe(first.fired.at(-1)?.jobId);

    // The next pass fires only ticks that came since (at most a couple), never one again.
    await lh.runSchedules();
    const rows = await jobsPerTick(pool, lh.schema, 'every-second');
    expect(rows.every((row) => row.jobs === 1 && row.ticks === 1)).toBe(true);
    expect(await jobCount(pool, lh.schema, 'sched-a')).toBe(rows.length + 1);
  });

  it('schedulers racing from several pools, and restarts that forgot their state, enqueue one job per tick', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.schedule('raced', { cron: '* * * * * *', queue: 'sched-race' });
    await rewind(pool, lh.schema, 'raced', '20 seconds');
    const pools = [testPool(2), testPool(2), testPool(2), testPool(2)];
    // Raw pools behind a transaction pooler send their statements unnamed, as a context's do.
    if (pooled()) for (const db of pools) runUnnamedOnPool(db);
    const services = pools.map((db) => new SchedulerService({ db, schema: lh.schema, intervalMs: 1000 }));
    const results: SchedulerResult[] = [];
    // Several rounds of four concurrent passes: the first round races for the same 20 ticks.
    const until = Date.now() + 2500;
    while (Date.now() < until) {
      results.push(...(await Promise.all(services.map((service) => service.runOnce()))));
    }
    const fired = results.flatMap((r) => r.fired);
    expect(results.reduce((n, r) => n + r.raced, 0)).toBeGreaterThan(0);
    let rows = await jobsPerTick(pool, lh.schema, 'raced');
    expect(rows.length).toBeGreaterThanOrEqual(20);
    expect(rows.every((row) => row.jobs === 1 && row.ticks === 1)).toBe(true);
    expect(fired.length).toBe(rows.length);
    expect(await jobCount(pool, lh.schema, 'sched-race')).toBe(rows.length);
    // Consecutive seconds: no tick was skipped between the first and the last.
    const times = rows.map((row) => row.tick_at.getTime());
    expect((times.at(-1)! - times[0]!) / 1000 + 1).toBe(rows.length);

    // A "restart" that lost the schedule's progress (last tick forgotten, start moved back) finds
    // the same ticks due again: the tick key inserts no second job for any of them.
    await rewind(pool, lh.schema, 'raced', '20 seconds');
    const again = await Promise.all(pools.map((db) => fireDueSchedules(db, lh.schema)));
    const refired = new Set(rows.map((row) => row.tick_at.getTime()));
    for (const f of again.flatMap((r) => r.fired)) expect(refired.has(f.tickAt.getTime())).toBe(false);
    rows = await jobsPerTick(pool, lh.schema, 'raced');
    expect(rows.every((row) => row.jobs === 1 && row.ticks === 1)).toBe(true);
    expect(await jobCount(pool, lh.schema, 'sched-race')).toBe(rows.length);
  });

  it('catchUp after a 10-tick outage: none skips, latest runs the newest once, { max } backfills the newest n', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const now = await dbNow(pool);
    // An hourly tick half an hour ago: all ten ticks of the outage are well past on time.
    const newest = new Date(Math.floor((now.getTime() - 30 * 60_000) / 1000) * 1000);
    const cron = `${newest.getUTCSeconds()} ${newest.getUTCMinutes()} * * * *`;
    const outageFrom = new Date(newest.getTime() - 10 * 3_600_000); // exclusive: 10 ticks after it
    const modes = [
      ['skip', 'none', 0],
      ['newest', 'latest', 1],
      ['three', { max: 3 }, 3],
      ['all', { max: 20 }, 10],
    ] as const;
    for (const [name, catchUp] of modes) {
      await lh.schedule(name, { cron, queue: `sched-${name}`, catchUp });
      await pool.query(
        `UPDATE "${lh.schema}".schedules SET fire_after = $2, last_tick_at = $2 WHERE name = $1`,
        [name, outageFrom],
      );
    }
    // A new schedule does not backfill the past, whatever its catch-up rule.
    await lh.schedule('fresh', { cron, queue: 'sched-fresh', catchUp: { max: 20 } });

    const result = await lh.runSchedules();
    for (const [name, , expected] of modes) {
      const fired = result.fired.filter((f) => f.schedule === name).map((f) => f.tickAt.getTime());
      const want = Array.from(
        { length: expected },
        (_, i) => newest.getTime() - (expected - 1 - i) * 3_600_000,
      );
      expect(fired, name).toEqual(want);
      expect(await jobCount(pool, lh.schema, `sched-${name}`), name).toBe(expected);
      const listed = (await lh.schedules()).find((s) => s.name === name);
      expect(listed?.lastTickAt, name).toEqual(newest); // skipped ticks count as handled
    }
    expect(await jobCount(pool, lh.schema, 'sched-fresh')).toBe(0);
    // Handled is handled: the next pass fires none of the outage's ticks.
    expect((await lh.runSchedules()).fired).toEqual([]);
  });

  it('a paused schedule fires nothing, and resumed it does not fire the ticks named while paused', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.schedule('held', { cron: '* * * * * *', queue: 'sched-held' });
    await rewind(pool, lh.schema, 'held', '5 seconds');
    await lh.pauseSchedule('held');
    expect((await lh.runSchedules()).fired).toEqual([]);
    const resumed = await lh.resumeSchedule('held');
    const after = await lh.runSchedules();
    // Resuming restarts the timetable at the resume (database time): only later ticks fire.
    for (const f of after.fired) expect(f.tickAt.getTime()).toBeGreaterThan(resumed.updatedAt.getTime());
    expect(after.fired.length).toBeLessThanOrEqual(2);
    expect(resumed.paused).toBe(false);
    // Removed, it fires nothing more; the jobs it fired keep their link.
    await lh.unschedule('held');
    await rewind(pool, lh.schema, 'held', '5 seconds');
    expect((await lh.runSchedules()).fired).toEqual([]);
  });

  it('a schedule with an ordering key enqueues its ticks in tick order behind one head', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.schedule('ordered', {
      cron: '* * * * * *',
      queue: 'sched-ordered',
      enqueueOptions: { orderingKey: 'one-at-a-time' },
    });
    await rewind(pool, lh.schema, 'ordered', '3 seconds');
    const { fired } = await lh.runSchedules();
    expect(fired.length).toBeGreaterThanOrEqual(3);
    const leases = await lh.claim({ queue: 'sched-ordered', owner: 'w', limit: 10 });
    expect(leases.map((l) => l.jobId)).toEqual([fired[0]!.jobId]);
    expect(await lh.complete(leases[0]!)).toBe(true);
    const next = await lh.claim({ queue: 'sched-ordered', owner: 'w', limit: 10 });
    expect(next.map((l) => l.jobId)).toEqual([fired[1]!.jobId]);
  });

  it("a worker's scheduler fires due ticks and its queues run them", async () => {
    // A schema of its own, never one handed on by an earlier file: the ticks must be this worker's
    // to fire (a CI run once saw all three jobs run and none fired by this scheduler).
    const lh: Leasehold = await migratedClient({ schema: uniqueSchema() });
    const pool = testPool(2);
    const ran: unknown[] = [];
    await lh.schedule('worked', { cron: '* * * * * *', queue: 'sched-work', payload: { n: 1 } });
    await rewind(pool, lh.schema, 'worked', '3 seconds');
    const worker = lh.worker({
      queues: { 'sched-work': async (job) => void ran.push(job.payload) },
      scheduleIntervalMs: 50,
      pollIntervalMs: 50,
    });
    const scheduled: SchedulerResult[] = [];
    worker.on('scheduled', (result) => scheduled.push(result));
    await worker.start();
    try {
      await waitFor(() => ran.length >= 3, { what: 'three scheduled jobs to run' });
      expect(scheduled.flatMap((r) => r.fired).length).toBeGreaterThanOrEqual(3);
      expect(ran[0]).toEqual({ n: 1 });
    } finally {
      await worker.stop();
    }
    const rows = await jobsPerTick(pool, lh.schema, 'worked');
    expect(rows.every((row) => row.ticks === 1)).toBe(true);
  });

  it('prunes tick rows beyond the newest kept per schedule', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.schedule('pruned', { cron: '* * * * * *', queue: 'sched-prune' });
    await rewind(pool, lh.schema, 'pruned', '10 seconds');
    const service = new SchedulerService({ db: lh.pool, schema: lh.schema, intervalMs: 1000, ticksKept: 4 });
    const { fired } = await service.runOnce();
    expect(fired.length).toBeGreaterThanOrEqual(10);
    const rows = await jobsPerTick(pool, lh.schema, 'pruned');
    expect(rows.map((row) => row.tick_at)).toEqual(fired.slice(-4).map((f) => f.tickAt));
  });
});
