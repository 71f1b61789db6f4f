import { describe, expect, it } from 'vitest';

// The chaos run's rate-limited-queue rules (chaos/limited.mjs) on planted histories: a clean run
// keeps every rule, and each anomaly planted into it breaks the rule written for it, so no rule is
// one that can never fire.

interface Claim {
  jobId: string;
  token: string;
  claimedAt: number;
  releasedAt: number;
}
interface Run {
  jobId: string;
  token: string;
  startedAt: number;
  endedAt: number | null;
  claimedAt: number | null;
  releasedAt: number | null;
}
interface Rule {
  name: string;
  value: number;
  ok: boolean;
}
const limited = (await import('../../chaos/harness/rate-limits.mjs' as string)) as {
  busiestWindow(times: number[], windowMs: number): number;
  mostAtOnce(intervals: { from: number; to: number }[]): number;
  measureLimited(
    history: { claims: Claim[]; runs: Run[]; unfinished?: number },
    settings: { rateMax: number; ratePerMs: number; concurrency: number },
  ): Record<string, number>;
  limitedInvariants(facts: Record<string, number>): Rule[];
};

const SETTINGS = { rateMax: 2, ratePerMs: 100, concurrency: 2 };
const LEASE_MS = 1000;

/** A clean history: two starts at the start of each 100 ms window, each run 30 ms, 5 windows. */
function cleanHistory(): { claims: Claim[]; runs: Run[]; unfinished: number } {
  const claims: Claim[] = [];
  const runs: Run[] = [];
  for (let w = 0; w < 5; w++) {
    for (let k = 0; k < 2; k++) {
      const jobId = String(w * 2 + k + 1);
      const claimedAt = 10_000 + w * 100 + k;
      claims.push({ jobId, token: '1', claimedAt, releasedAt: claimedAt + 40 });
      runs.push({
        jobId,
        token: '1',
        startedAt: claimedAt + 2,
        endedAt: claimedAt + 32,
        claimedAt,
        releasedAt: claimedAt + 40,
      });
    }
  }
  return { claims, runs, unfinished: 0 };
}

function broken(history: ReturnType<typeof cleanHistory>): string[] {
  const rules = limited.limitedInvariants(limited.measureLimited(history, SETTINGS));
  return rules.filter((rule) => !rule.ok).map((rule) => rule.name);
}

describe('the rate-limited-queue rules of the chaos checker', () => {
  it('a clean history keeps every rule', () => {
    expect(broken(cleanHistory())).toEqual([]);
    const facts = limited.measureLimited(cleanHistory(), SETTINGS);
    expect(facts).toMatchObject({
      busiestClaimWindow: 2,
      busiestHandlerWindow: 2,
      mostLiveLeases: 2,
      mostHandlers: 2,
    });
  });

  it('a third claim inside one window breaks the claims rule and the handler-starts rule', () => {
    const history = cleanHistory();
    // Job 3's claim moved to 99 ms after job 1's: three claims inside [10000, 10100).
    const moved = { claimedAt: 10_099, releasedAt: 10_139 };
    Object.assign(history.claims[2] as Claim, moved);
    Object.assign(history.runs[2] as Run, { ...moved, startedAt: 10_100, endedAt: 10_130 });
    expect(broken(history)).toEqual([
      'rate-limited queue: most claims in any 100 ms window',
      "rate-limited queue: most handler starts in any 100 ms window (by their claim's time)",
    ]);
  });

  it('a window exactly perMs apart is two windows: half-open, not over the limit', () => {
    expect(limited.busiestWindow([0, 1, 100, 101], 100)).toBe(2);
    expect(limited.busiestWindow([0, 1, 99.9], 100)).toBe(3);
  });

  it('a claim of a killed worker counts as live until its lease ends, and breaks the cap if another ran meanwhile', () => {
    const history = cleanHistory();
    // Job 1's worker was killed: no end record, its lease ran the full LEASE_MS.
    const first = history.claims[0] as Claim;
    first.releasedAt = first.claimedAt + LEASE_MS;
    Object.assign(history.runs[0] as Run, { endedAt: null, releasedAt: first.releasedAt });
    expect(broken(history)).toEqual([
      'rate-limited queue: most live leases at once',
      'rate-limited queue: most handlers running at once, outside the lease-expiry window',
    ]);
  });

  it('a handler that outlives its lease (a paused worker) is not counted past the lease: the documented window', () => {
    const history = cleanHistory();
    // Job 1's lease ended at 10,040 (expired), but its handler, paused, ran on until 10,500.
    (history.runs[0] as Run).endedAt = 10_500;
    expect(broken(history)).toEqual([]);
    expect(limited.measureLimited(history, SETTINGS).outlivedLease).toBe(1);
  });

  it('a handler run whose claim is missing from the history, and a job left unfinished, are reported', () => {
    const history = cleanHistory();
    history.runs.push({
      jobId: '99',
      token: '1',
      startedAt: 20_000,
      endedAt: 20_010,
      claimedAt: null,
      releasedAt: null,
    });
    history.unfinished = 1;
    expect(broken(history)).toEqual([
      'rate-limited queue: handler runs for a claim the history does not hold',
      'rate-limited queue: jobs not succeeded after the drain',
    ]);
  });

  it('a limit never reached breaks the handler-starts rule: the load, not the limit, set the pace', () => {
    const history = cleanHistory();
    // Keep one job per window.
    history.claims = history.claims.filter((_, i) => i % 2 === 0);
    history.runs = history.runs.filter((_, i) => i % 2 === 0);
    expect(broken(history)).toEqual([
      "rate-limited queue: most handler starts in any 100 ms window (by their claim's time)",
    ]);
  });

  it('counts intervals that touch end to start as one at a time', () => {
    expect(
      limited.mostAtOnce([
        { from: 0, to: 10 },
        { from: 10, to: 20 },
      ]),
    ).toBe(1);
    expect(
      limited.mostAtOnce([
        { from: 0, to: 10 },
        { from: 9, to: 20 },
      ]),
    ).toBe(2);
  });
});
