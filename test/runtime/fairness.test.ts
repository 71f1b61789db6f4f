import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/index.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('per-key concurrency limits', () => {
  it('never runs more than the limit of one key at once while 8 claimers race, checked continuously', async () => {
    const lh = await migratedClient({ poolSize: 12 });
    await lh.configureQueue('tenants', { concurrencyLimitPerKey: 2 });
    const items = [];
    for (let i = 0; i < 240; i++) items.push({ payload: { i }, concurrencyKey: `tenant-${i % 4}` });
    for (let i = 0; i < 20; i++) items.push({ payload: { plain: i } });
    await lh.enqueueMany('tenants', items);

    const pool = testPool(2);
    let claiming = true;
    let worst = 0;
    let polls = 0;
    const watcher = (async () => {
      while (claiming) {
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${lh.schema}".jobs
           WHERE status = 'running' AND concurrency_key IS NOT NULL GROUP BY concurrency_key`,
        );
        for (const row of rows) worst = Math.max(worst, row.n);
        polls++;
      }
    })();
    let done = 0;
    let failedOnce = 0;
    const claimer = async (n: number) => {
      let idle = 0;
      while (idle < 30) {
        const leases = await lh.claim({ queue: 'tenants', owner: `c${n}`, limit: 4 });
        if (leases.length === 0) {
          idle++;
          await pause(3);
          continue;
        }
        idle = 0;
        await pause(2);
        for (const lease of leases) {
          // Some runs fail and retry at once: a failure gives its slot back too.
          if (lease.attempt === 1 && Number(lease.jobId) % 7 === 0) {
            failedOnce++;
            await lh.fail(lease, new Error('flaky'), { delayMs: 0 });
          } else {
            await lh.complete(lease);
            done++;
          }
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, n) => claimer(n)));
    claiming = false;
    await watcher;
    expect(done).toBe(260);
    expect(failedOnce).toBeGreaterThan(0);
    expect(polls).toBeGreaterThan(5);
    expect(worst).toBeLessThanOrEqual(2);
    expect(worst).toBe(2); // the limit was reached, so the check above was exercised
    const counters = await pool.query(`SELECT sum(running)::int AS n FROM "${lh.schema}".concurrency_keys`);
    expect(counters.rows[0].n).toBe(0);
  });

  it('passes over a saturated key to claim other keys behind it', async () => {
    const lh = await migratedClient();
    await lh.configureQueue('busy', { concurrencyLimitPerKey: 1 });
    await lh.enqueueMany('busy', [
      ...Array.from({ length: 50 }, () => ({ payload: {}, concurrencyKey: 'big' })),
      { payload: { small: true }, concurrencyKey: 'small' },
    ]);
    const leases = await lh.claim({ queue: 'busy', owner: 'w', limit: 10 });
    expect(leases).toHaveLength(2);
    expect(leases.map((l) => l.payload)).toContainEqual({ small: true });
    expect(await lh.claim({ queue: 'busy', owner: 'w', limit: 10 })).toEqual([]);
    await lh.complete(leases[0]!);
    expect(await lh.claim({ queue: 'busy', owner: 'w', limit: 10 })).toHaveLength(1);
  });

  it("does not spend a claim's batch on a saturated key's jobs: a claim of one takes the job behind them", async () => {
    const lh = await migratedClient();
    await lh.configureQueue('full', { concurrencyLimitPerKey: 1 });
    await lh.enqueueMany(
      'full',
      Array.from({ length: 5 }, () => ({ payload: {}, concurrencyKey: 'big' })),
    );
    const [running] = await lh.claim({ queue: 'full', owner: 'w', limit: 1 });
    expect(running).toBeDefined();
    // Behind four waiting jobs of the saturated key, in claim order.
    await lh.enqueue('full', { small: true }, { concurrencyKey: 'small' });
    const leases = await lh.claim({ queue: 'full', owner: 'w', limit: 1 });
    expect(leases.map((l) => l.payload)).toEqual([{ small: true }]);
  });

  it('validates the queue settings before writing', async () => {
    const lh = await migratedClient();
    await expect(lh.configureQueue('q', { concurrencyLimitPerKey: 0 })).rejects.toThrow(ValidationError);
    await expect(lh.configureQueue('q', { agingIntervalMs: -1 })).rejects.toThrow(ValidationError);
    await expect(lh.enqueue('q', {}, { concurrencyKey: '' })).rejects.toThrow(ValidationError);
    expect(await lh.listQueues()).toEqual([]);
  });
});

describe('aging (seed test 8: a flood of high-priority work)', () => {
  // Aging settings: one priority step per 100 ms. The flood runs at priority 5 and its jobs age
  // too, so a priority-0 job outranks a flood job once it has waited 5 steps longer than it (ties
  // go to the older job): the promised bound on its wait is 5 x 100 ms + the flood jobs' own wait
  // (a backlog of about 40 at about 100 jobs/s: 400 ms) + one aging pass (at most 125 ms with the
  // ±25% jitter on 100 ms) + the time for a slot to free and a claim to run. For the last two we
  // allow a generous 2,500 ms: the suite shares two cores with other work, and timers and
  // statements slow down badly under load.
  const STEP_MS = 100;
  const FLOOD_PRIORITY = 5;
  const BOUND_MS = FLOOD_PRIORITY * STEP_MS + 400 + 2500;

  // With aging off, the flood is enqueued whole at the start, more than the worker can run in the
  // time the test watches (two slots of a 10 ms handler run at most 200 jobs a second): a top-up
  // racing the worker on a loaded machine once fell behind, the flood ran dry and a low job ran,
  // which is no starvation test at all. With aging on, the backlog stays about 40 (the bound's sum).
  const WHOLE_FLOOD = 2000;

  async function flood(aging: boolean) {
    const lh = await migratedClient();
    const queue = aging ? 'aged' : 'unaged';
    if (aging) await lh.configureQueue(queue, { agingIntervalMs: STEP_MS, agingMaxBoost: 20 });
    const pool = testPool(2);
    const topUp = async () => {
      const { rows } = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE status = 'pending' AND priority >= $1`,
        [FLOOD_PRIORITY],
      );
      if ((rows[0]?.n ?? 0) < 40) {
        await lh.enqueueMany(
          queue,
          Array.from({ length: 40 }, () => ({ payload: { high: true }, priority: FLOOD_PRIORITY })),
        );
      }
    };
    if (aging) await topUp();
    else {
      await lh.enqueueMany(
        queue,
        Array.from({ length: WHOLE_FLOOD }, () => ({ payload: { high: true }, priority: FLOOD_PRIORITY })),
      );
    }
    const low = await lh.enqueueMany(
      queue,
      Array.from({ length: 3 }, () => ({ payload: { low: true }, priority: 0 })),
    );
    const enqueuedAt = performance.now();
    const lowDone: number[] = [];
    const worker = await started(
      lh.worker({
        queues: {
          [queue]: {
            concurrency: 2,
            handler: async (job) => {
              if ((job.payload as { low?: boolean }).low) lowDone.push(performance.now() - enqueuedAt);
              await pause(10);
            },
          },
        },
        agingPassIntervalMs: 100,
        pollIntervalMs: 50,
        pruneIntervalMs: 0,
      }),
    );
    let flooding = true;
    const flooder = (async () => {
      while (flooding) {
        await topUp();
        await pause(20);
      }
    })();
    return {
      lh,
      low,
      lowDone,
      worker,
      stop: async () => {
        flooding = false;
        await flooder;
        await worker.stop();
      },
    };
  }

  it('with aging on, the longest wait of a low-priority job stays within the bound its settings promise', async () => {
    const run = await flood(true);
    try {
      await waitFor(() => run.lowDone.length === 3, {
        timeoutMs: 8000,
        what: 'the low-priority jobs to run',
      });
      expect(Math.max(...run.lowDone)).toBeLessThanOrEqual(BOUND_MS);
    } finally {
      await run.stop();
    }
    // They ran because aging raised them to the flood's priority (and won the tie as older jobs).
    const { rows } = await testPool(1).query<{ priority: number }>(
      `SELECT priority FROM "${run.lh.schema}".finished_jobs WHERE id = ANY($1::bigint[])`,
      [run.low.ids],
    );
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row.priority).toBeGreaterThanOrEqual(FLOOD_PRIORITY);
  });

  it('with aging off, the same flood starves the low-priority jobs', async () => {
    const run = await flood(false);
    try {
      // Past the bound aging promises, with the worker busy on the flood all along: nothing low ran.
      const since = performance.now();
      await waitFor(
        () => performance.now() - since > BOUND_MS + 500 && run.worker.counters.completed >= 100,
        {
          what: 'the flood to keep the worker busy past the bound',
        },
      );
      expect(run.lowDone).toEqual([]);
      // And the flood was still there all along: high-priority jobs are still waiting.
      const { rows } = await testPool(1).query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${run.lh.schema}".jobs WHERE status = 'pending' AND priority >= $1`,
        [FLOOD_PRIORITY],
      );
      expect(rows[0]?.n).toBeGreaterThan(0);
    } finally {
      await run.stop();
    }
  });
});

describe('weighted queues in one worker', () => {
  it('shares slots by weight while both queues are backlogged, and gives an idle queue’s share away', async () => {
    const lh = await migratedClient();
    await lh.enqueueMany(
      'heavy',
      Array.from({ length: 300 }, (_, i) => ({ payload: { i } })),
    );
    await lh.enqueueMany(
      'light',
      Array.from({ length: 300 }, (_, i) => ({ payload: { i } })),
    );
    const order: string[] = [];
    const handler = (queue: string) => async () => {
      await pause(5);
      order.push(queue);
    };
    const worker = await started(
      lh.worker({
        slots: 4,
        queues: {
          heavy: { weight: 3, concurrency: 4, handler: handler('heavy') },
          light: { weight: 1, concurrency: 4, handler: handler('light') },
        },
        pruneIntervalMs: 0,
      }),
    );
    await waitFor(() => order.length >= 240, { what: '240 completions' });
    // Tolerance: within 0.1 of the 3:1 weights (0.75) over completions 40..240 (after ramp-up).
    const window = order.slice(40, 240);
    const heavyShare = window.filter((q) => q === 'heavy').length / window.length;
    expect(heavyShare).toBeGreaterThanOrEqual(0.65);
    expect(heavyShare).toBeLessThanOrEqual(0.85);
    // Once heavy runs dry, light takes every slot: it finishes its backlog.
    await waitFor(() => order.filter((q) => q === 'light').length === 300, {
      timeoutMs: 20_000,
      what: 'light to drain using all slots',
    });
    await worker.stop();
  });

  it('refuses weights without worker-level slots', async () => {
    const lh = await migratedClient();
    expect(() => lh.worker({ queues: { a: { weight: 2, handler: async () => {} } } })).toThrow(
      ValidationError,
    );
  });
});
