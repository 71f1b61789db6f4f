import { describe, expect, it } from 'vitest';
import { Leasehold, type Worker } from '../../src/index.js';
import { databaseUrl, listenOptions, migratedClient, testPool, waitFor } from '../support/db.js';
import { assertFreshDist } from '../support/fresh-dist.js';
import { forkWorker, killHard, started } from '../support/worker.js';

/** The largest number of times inside any half-open interval [t, t + windowMs). */
function busiestWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let first = 0;
  for (let last = 0; last < sorted.length; last++) {
    while ((sorted[last] as number) - (sorted[first] as number) >= windowMs) first++;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

describe('workers on a rate-limited queue', () => {
  it('three workers start at most max jobs per window, measured by the handlers in database time', async () => {
    const lh = await migratedClient();
    const pool = testPool(4);
    const max = 5;
    const perMs = 250;
    const jobs = 30;
    await lh.configureQueue('api', { rateLimit: { max, perMs } });
    await lh.enqueueMany(
      'api',
      Array.from({ length: jobs }, (_, i) => ({ payload: { i } })),
    );
    const claimedAt: number[] = [];
    const startedAt: number[] = [];
    const clients = [
      lh,
      ...[1, 2].map(() => new Leasehold({ connectionString: databaseUrl(), schema: lh.schema, poolSize: 3 })),
    ];
    try {
      for (const [n, client] of clients.entries()) {
        await started(
          client.worker({
            owner: `w${n}`,
            queues: {
              api: {
                concurrency: 4,
                handler: async (job) => {
                  // The handler's own view: its claim's database time, and the database's clock now.
                  const { rows } = await pool.query<{ claimed: number; now: number }>(
                    `SELECT (extract(epoch FROM claimed_at) * 1000)::float8 AS claimed,
                            (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now
                     FROM "${lh.schema}".jobs WHERE id = $1`,
                    [job.id],
                  );
                  claimedAt.push(rows[0]?.claimed as number);
                  startedAt.push(rows[0]?.now as number);
                },
              },
            },
            pollIntervalMs: 20,
            recoveryIntervalMs: 0,
          }),
        );
      }
      await waitFor(() => claimedAt.length === jobs, { what: 'every job started', timeoutMs: 20_000 });
      expect(busiestWindow(claimedAt, perMs)).toBe(max);
      for (const [i, at] of startedAt.entries()) expect(at).toBeGreaterThanOrEqual(claimedAt[i] as number);
      // Six windows' worth: the last start is at least five windows after the first.
      const sorted = [...claimedAt].sort((a, b) => a - b);
      expect((sorted.at(-1) as number) - (sorted[0] as number)).toBeGreaterThanOrEqual(5 * perMs);
    } finally {
      for (const client of clients.slice(1)) await client.close();
    }
  });

  it('a throttled worker sleeps until the next start is free instead of polling, even when woken', async () => {
    const lh = await migratedClient(listenOptions());
    const perMs = 400;
    await lh.configureQueue('api', { rateLimit: { max: 2, perMs } });
    const starts: number[] = [];
    const claims: { at: number; jobs: number }[] = [];
    const worker: Worker = lh.worker({
      queues: { api: { concurrency: 10, handler: async () => void starts.push(performance.now()) } },
      // A worker polling this often would claim ~25 times per window if it ignored the throttle.
      pollIntervalMs: 15,
      recoveryIntervalMs: 0,
    });
    worker.on('claimed', (_queue, info) => claims.push({ at: performance.now(), jobs: info.jobs }));
    await started(worker);
    // Enqueued one at a time: every enqueue is a wake-up notification, most while throttled.
    for (let i = 0; i < 8; i++) await lh.enqueue('api', { i });
    await waitFor(() => starts.length === 8, { what: 'all jobs started', timeoutMs: 10_000 });
    const lastStart = Math.max(...starts);
    const whileBacklogged = claims.filter((claim) => claim.at <= lastStart);
    // 8 jobs at 2 per window take 4 windows (3 waits); each wait costs one claim (measured: 4
    // claims in all), where polling would have made about 80.
    expect(whileBacklogged.length).toBeLessThanOrEqual(8);
    const stats = await lh.stats();
    const api = stats.queues.find((queue) => queue.queue === 'api');
    expect(api?.throttle?.throttledClaims).toBeGreaterThanOrEqual(3);
    expect(api?.throttle?.throttledClaims).toBeLessThanOrEqual(whileBacklogged.length);
    // Three waits of nearly a window each (the union, not one per claim).
    expect(api?.throttle?.throttledMs).toBeGreaterThanOrEqual(2 * perMs);
    expect(api?.throttle?.throttledMs).toBeLessThanOrEqual(4 * perMs);
  });
});

describe('workers on a concurrency-limited queue', () => {
  it('three workers never run more than concurrencyLimit handlers at once', async () => {
    const lh = await migratedClient();
    await lh.configureQueue('render', { concurrencyLimit: 2 });
    await lh.enqueueMany(
      'render',
      Array.from({ length: 16 }, (_, i) => ({ payload: { i } })),
    );
    let running = 0;
    let most = 0;
    let done = 0;
    const clients = [
      lh,
      ...[1, 2].map(() => new Leasehold({ connectionString: databaseUrl(), schema: lh.schema, poolSize: 3 })),
    ];
    try {
      for (const [n, client] of clients.entries()) {
        await started(
          client.worker({
            owner: `w${n}`,
            queues: {
              render: {
                concurrency: 5,
                handler: async () => {
                  running++;
                  most = Math.max(most, running);
                  await new Promise((resolve) => setTimeout(resolve, 15));
                  running--;
                  done++;
                },
              },
            },
            pollIntervalMs: 20,
            recoveryIntervalMs: 0,
          }),
        );
      }
      await waitFor(() => done === 16, { what: 'every job ran', timeoutMs: 20_000 });
      expect(most).toBe(2);
    } finally {
      for (const client of clients.slice(1)) await client.close();
    }
  });

  it("a killed worker's slots come back once its leases expire", async () => {
    assertFreshDist();
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.configureQueue('render', { concurrencyLimit: 2 });
    await lh.enqueueMany('render', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    const victim = await forkWorker({
      schema: lh.schema,
      queue: 'render',
      mode: 'slow',
      sleepMs: 60_000,
      leaseMs: 600,
      concurrency: 2,
      owner: 'victim',
    });
    await waitFor(() => victim.messages.filter((m) => m.type === 'begin').length === 2, {
      what: 'the victim holding both slots',
    });
    await killHard(victim.child);
    const ran: string[] = [];
    await started(
      lh.worker({
        owner: 'survivor',
        queues: { render: { concurrency: 2, handler: async (job) => void ran.push(job.id) } },
        pollIntervalMs: 20,
        recoveryIntervalMs: 0, // no sweep: the slots come back by lease expiry alone
      }),
    );
    await waitFor(() => ran.length === 1, { what: 'the third job run by the survivor', timeoutMs: 10_000 });
    // It started only after the victim's leases had lapsed, in database time.
    const rows = await waitFor(
      async () => {
        const result = await pool.query<{ ok: boolean }>(
          `SELECT f.claimed_at >= (SELECT max(lease_expires_at) FROM "${lh.schema}".jobs WHERE lease_owner = 'victim') AS ok
           FROM "${lh.schema}".finished_jobs AS f WHERE f.lease_owner = 'survivor'`,
        );
        return result.rows.length > 0 ? result.rows : null;
      },
      { what: "the survivor's completion" },
    );
    expect(rows).toEqual([{ ok: true }]);
  });
});
