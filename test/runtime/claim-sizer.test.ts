import { describe, expect, it } from 'vitest';
import type { ClaimInfo } from '../../src/index.js';
import { CLAIM_SIZER_DEFAULTS, ClaimSizer } from '../../src/runtime/claim/claim-sizer.js';
import { countByStatus, migratedClient, testPool, waitFor } from '../support/db.js';
import { deferred, started } from '../support/worker.js';

describe('the adaptive read-ahead (ClaimSizer)', () => {
  const span = CLAIM_SIZER_DEFAULTS.rateSpanMs;

  it('starts at 0, and its bound is the observed completion rate × a quarter of the lease', () => {
    const sizer = new ClaimSizer(1000, 4, CLAIM_SIZER_DEFAULTS, 0);
    expect(sizer.readAhead(0)).toBe(0);
    expect(sizer.bound(0)).toBe(0);
    for (let i = 0; i < 100; i++) sizer.settled(10 + i);
    // 100 completions over the 2 s span: 50 per second; a quarter of a 1 s lease holds 12 of them.
    expect(sizer.rate(200)).toBe(50);
    expect(sizer.bound(200)).toBe(12);
  });

  it('grows like slow start on claims that find the buffer short, never past the bound, and falls to 0 when nothing completes', () => {
    const sizer = new ClaimSizer(1000, 4, CLAIM_SIZER_DEFAULTS, 0);
    for (let i = 0; i < 100; i++) sizer.settled(10);
    const seen: number[] = [];
    for (let round = 0; round < 5; round++) {
      sizer.claiming(0, 100);
      seen.push(sizer.readAhead(100));
    }
    expect(seen).toEqual([4, 8, 12, 12, 12]);
    // A buffer that covers the slots is no reason to grow, unless it ran dry since the last claim.
    const quiet = new ClaimSizer(60_000, 4, CLAIM_SIZER_DEFAULTS, 0);
    for (let i = 0; i < 1000; i++) quiet.settled(10);
    quiet.claiming(0, 20);
    expect(quiet.readAhead(20)).toBe(4);
    quiet.claiming(4, 20);
    expect(quiet.readAhead(20)).toBe(4);
    quiet.starved();
    quiet.claiming(4, 20);
    expect(quiet.readAhead(20)).toBe(8);
    // Once the span passes without a completion, the rate, the bound and the read-ahead are 0.
    expect(quiet.readAhead(20 + span + 1)).toBe(0);
  });

  it('is capped at maxReadAhead whatever the rate, and halves when a buffered job waited past a quarter of the lease', () => {
    const sizer = new ClaimSizer(30_000, 16, { ...CLAIM_SIZER_DEFAULTS, maxReadAhead: 100 }, 0);
    for (let i = 0; i < 10_000; i++) sizer.settled(5);
    for (let round = 0; round < 10; round++) sizer.claiming(0, 10);
    expect(sizer.readAhead(10)).toBe(100);
    sizer.started(1000); // well within a quarter of 30 s
    expect(sizer.readAhead(10)).toBe(100);
    sizer.started(7501);
    expect(sizer.readAhead(10)).toBe(50);
  });
});

describe('a worker at its defaults reads ahead adaptively', () => {
  it('grows its read-ahead past the free slots when handlers are fast, and holds no more unstarted jobs than the read-ahead, within the bound', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const jobs = 3000;
    await lh.enqueueMany(
      'fast',
      Array.from({ length: jobs }, (_, i) => ({ payload: i })),
    );
    const runs = new Map<number, number>();
    let startedCount = 0;
    const worker = lh.worker({
      queues: {
        fast: {
          concurrency: 2,
          handler: async (job) => {
            startedCount++;
            runs.set(job.payload as number, (runs.get(job.payload as number) ?? 0) + 1);
          },
        },
      },
    });
    const claims: ClaimInfo[] = [];
    const violations: string[] = [];
    let largestReadAhead = 0;
    worker.on('claimed', (_queue, info) => {
      claims.push(info);
      largestReadAhead = Math.max(largestReadAhead, info.readAhead);
      if (info.readAheadBound === null || info.readAhead > info.readAheadBound)
        violations.push(`read-ahead ${info.readAhead} over its bound ${info.readAheadBound}`);
      if (info.jobs > 2 + info.readAhead)
        violations.push(`claimed ${info.jobs} with 2 slots and read-ahead ${info.readAhead}`);
      // Once the runner has taken the claimed rows: those not started are the buffer.
      setImmediate(() => {
        const unstarted = worker.counters.claimed - startedCount;
        if (unstarted > largestReadAhead)
          violations.push(`${unstarted} unstarted with read-ahead at most ${largestReadAhead}`);
      });
    });
    await started(worker);
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === jobs, {
      what: 'all done',
      timeoutMs: 30_000,
    });
    expect(violations).toEqual([]);
    expect(runs.size).toBe(jobs);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    // Without read-ahead no claim could exceed the 2 free slots.
    expect(Math.max(...claims.map((c) => c.jobs))).toBeGreaterThan(2);
    expect(largestReadAhead).toBeGreaterThan(2);
  });

  it('with a short lease keeps its bound at most the rate its own handlers showed × lease / 4, and once handlers stop returning holds no more unstarted leases than its read-ahead', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.enqueueMany(
      'short',
      Array.from({ length: 400 }, (_, i) => ({ payload: i })),
    );
    const gate = deferred();
    const leaseMs = 1000;
    let settledCount = 0;
    let blocked = 0;
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        short: {
          concurrency: 2,
          leaseMs,
          handler: async () => {
            if (settledCount >= 60) {
              blocked++;
              await gate.promise;
              return;
            }
            await new Promise((resolve) => setTimeout(resolve, 5));
            settledCount++;
          },
        },
      },
    });
    const violations: string[] = [];
    let largestReadAhead = 0;
    worker.on('claimed', (_queue, info) => {
      largestReadAhead = Math.max(largestReadAhead, info.readAhead);
      // The worker's rate counts at most every handler settled so far, over a 2 s span.
      const most = Math.floor(
        ((settledCount / (CLAIM_SIZER_DEFAULTS.rateSpanMs / 1000)) * leaseMs) / 1000 / 4,
      );
      if (info.readAheadBound === null || info.readAheadBound > most)
        violations.push(`bound ${info.readAheadBound} over ${most} after ${settledCount} completions`);
      if (info.readAhead > (info.readAheadBound ?? 0))
        violations.push(`read-ahead ${info.readAhead} over its bound ${info.readAheadBound}`);
    });
    await started(worker);
    await waitFor(() => blocked === 2, { what: 'both handlers blocked', timeoutMs: 30_000 });
    // Every settled job's completion written: no lease is left running but the blocked and buffered.
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === settledCount, {
      what: 'the completions written',
    });
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE status = 'running' AND lease_owner = $1`,
      [worker.owner],
    );
    expect(violations).toEqual([]);
    // No bound the worker could have computed exceeds the rate of every completion so far.
    const most = Math.floor(((settledCount / (CLAIM_SIZER_DEFAULTS.rateSpanMs / 1000)) * leaseMs) / 1000 / 4);
    // Two leases run blocked handlers; any other is a claimed job waiting in the buffer.
    expect(rows[0]!.n - 2).toBeLessThanOrEqual(most);
    expect(largestReadAhead).toBeLessThanOrEqual(most);
    const stopping = worker.stop();
    gate.resolve();
    await stopping;
  });

  it('keeps an explicit prefetch as a fixed choice: prefetch 0 claims only for free slots however fast the handlers', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.enqueueMany(
      'fixed',
      Array.from({ length: 500 }, (_, i) => ({ payload: i })),
    );
    const worker = lh.worker({
      queues: { fixed: { concurrency: 2, prefetch: 0, handler: async () => {} } },
    });
    const claims: ClaimInfo[] = [];
    worker.on('claimed', (_queue, info) => claims.push(info));
    await started(worker);
    // 500 jobs two at a time are some 250 claims and as many completions: about 10 s on two cores
    // beside two CPU-bound processes (npm run test:loaded), so the deadline is the run's, not 10 s.
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 500, {
      what: 'all done',
      timeoutMs: 80_000,
    });
    expect(claims.length).toBeGreaterThan(0);
    expect(claims.every((c) => c.jobs <= 2 && c.readAhead === 0 && c.readAheadBound === null)).toBe(true);
  }, 90_000);
});
