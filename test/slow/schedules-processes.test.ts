import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { databaseUrl, migratedClient, testPool, waitFor } from '../support/db.js';
import { assertFreshDist } from '../support/fresh-dist.js';

// Issue 15's named test, in `npm run test:slow` (it takes real time): three worker processes, each
// firing schedules every second (the default), and a one-second cron for 20 s enqueue exactly one
// job per tick, counted by tick. One process is killed hard halfway and a new one started: the
// restart changes nothing either.

const children = new Set<ChildProcess>();
afterEach(() => {
  for (const child of children) child.kill('SIGKILL');
  children.clear();
});

async function startWorker(schema: string, owner: string): Promise<ChildProcess> {
  const script = fileURLToPath(new URL('../support/schedule-worker.mjs', import.meta.url));
  const child = fork(script, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.add(child);
  const started = new Promise<void>((resolve, reject) => {
    child.on('message', (message: { type?: string }) => message.type === 'started' && resolve());
    child.once('exit', (code) => reject(new Error(`schedule worker exited early (${code})`)));
  });
  child.send({ databaseUrl: databaseUrl(), schema, queue: 'every-second', owner });
  await started;
  return child;
}

async function stopWorker(child: ChildProcess, hard = false): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (hard) child.kill('SIGKILL');
  else child.send('stop');
  await gone;
  children.delete(child);
}

describe('schedules fired by several worker processes', () => {
  it('3 worker processes and a 1-second cron for 20 s enqueue exactly one job per tick', async () => {
    assertFreshDist();
    const lh = await migratedClient();
    const pool = testPool(2);
    const workers = await Promise.all(['a', 'b', 'c'].map((name) => startWorker(lh.schema, `sched-${name}`)));
    const created = await lh.schedule('every-second', { cron: '* * * * * *', queue: 'every-second' });
    const dbSeconds = async () =>
      Number((await pool.query<{ s: string }>('SELECT extract(epoch FROM now())::text AS s')).rows[0]?.s);
    const start = created.createdAt.getTime() / 1000;
    await waitFor(async () => (await dbSeconds()) >= start + 10, { timeoutMs: 30_000, intervalMs: 250 });
    await stopWorker(workers[0] as ChildProcess, true); // a crash halfway...
    workers[0] = await startWorker(lh.schema, 'sched-a2'); // ...and a restart
    await waitFor(async () => (await dbSeconds()) >= start + 20, { timeoutMs: 30_000, intervalMs: 250 });
    await Promise.all(workers.map((child) => stopWorker(child)));

    const { rows } = await pool.query<{ tick_at: Date; jobs: number }>(
      `SELECT t.tick_at,
              (SELECT count(*) FROM "${lh.schema}".jobs AS j WHERE j.id = t.job_id)::int +
              (SELECT count(*) FROM "${lh.schema}".finished_jobs AS f WHERE f.id = t.job_id)::int AS jobs
       FROM "${lh.schema}".schedule_ticks AS t
       WHERE t.schedule_name = 'every-second'
       ORDER BY t.tick_at`,
    );
    const { rows: totals } = await pool.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM "${lh.schema}".jobs WHERE queue_name = 'every-second')::int +
              (SELECT count(*) FROM "${lh.schema}".finished_jobs WHERE queue_name = 'every-second')::int AS n`,
    );
    // One job per tick, and no job without its tick.
    expect(rows.filter((row) => row.jobs !== 1)).toEqual([]);
    expect(totals[0]?.n).toBe(rows.length);
    // Every second of the 20 s has its tick: none skipped across the crash, none twice (primary key).
    const times = rows.map((row) => row.tick_at.getTime());
    expect(rows.length).toBeGreaterThanOrEqual(19);
    expect((times.at(-1)! - times[0]!) / 1000 + 1).toBe(rows.length);
    expect(new Set(times).size).toBe(rows.length);
  }, 120_000);
});
