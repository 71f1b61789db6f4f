import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ClaimRouter } from '../../src/runtime/claim/claim-router.js';
import type { Queryable, Statement } from '../../src/storage/db.js';
import {
  type ClaimShape,
  claimShapeOf,
  JobClaimMany,
  JobClaimManyAnySchema,
  JobClaimManyFair,
  JobClaimManyLimited,
  JobClaimManyLimitedFair,
  JobClaimManyThrottled,
  JobClaimManyUnrouted,
} from '../../src/storage/leases/claim.js';
import type { QueueClaimSettingsRow } from '../../src/storage/queues/queues.js';
import { migratedClient, testPool } from '../support/db.js';

// The claim is one module composed from named fragments (issues 28 and 29). Its statements' text
// was recorded at a7de666, before the claim's variant files became fragments, and the composed text
// was that text byte for byte. Re-recorded when job identities (migration 027, issue 31) were merged
// into the composer: every claim returns `job_uid` (the only change to the a7de666 texts), and the
// limited, round-robin and throttled claims gained a twin for a schema before 027 (the plain claim's
// is its unrouted statement), which reads the identity without naming its column. The composed text
// must be the recorded text, byte for byte (the plain claim is the hot path, and a definer function's
// name is a digest of its text). A deliberate change to a statement re-records its entry, and says why.
// Re-recorded once since: the two returned times are computed in float8 rather than through numeric
// (`CLAIMED_TIMES` in fragments.ts: the same values, 0.4 µs less server time per claimed row); no
// other byte of any entry changed.
const RECORDED: Record<string, { name: string; text: string }> = JSON.parse(
  readFileSync(new URL('../support/fixtures/claim-statements-027.json', import.meta.url), 'utf8'),
);
const SCHEMA = 'leasehold';

const STATEMENTS: Record<string, (schema: string) => Statement> = {
  claim_jobs: JobClaimMany,
  claim_jobs_unrouted: JobClaimManyUnrouted,
  claim_jobs_limited: JobClaimManyLimited,
  claim_jobs_limited_fair: JobClaimManyLimitedFair,
  claim_jobs_fair: JobClaimManyFair,
  claim_jobs_throttled: JobClaimManyThrottled,
  claim_jobs_limited_any_schema: JobClaimManyAnySchema.limited,
  claim_jobs_fair_any_schema: JobClaimManyAnySchema.fair,
  claim_jobs_limited_fair_any_schema: JobClaimManyAnySchema.limitedFair,
  claim_jobs_throttled_any_schema: JobClaimManyAnySchema.throttled,
};

// What only a limit or fairness reads: a plain queue's claim must not name any of it.
const FEATURE_TABLES = ['concurrency_keys', 'rate_limits', 'rate_limit_keys', 'fair_turns', 'fairness_key'];

// What a claim returns of each job: ClaimedRow's columns, in its order.
const CLAIMED_ROW = [
  'id',
  'payload',
  'lease_token',
  'lease_claim_id',
  'attempt_count',
  'max_attempts',
  'priority',
  'job_uid',
  'lease_expires_ms',
  'available_ms',
  'plain',
];
// What the lease grant sets: the move to running, the attempt, the fence, the lease, the slot flags.
const GRANT_SETS = [
  'status',
  'attempt_count',
  'lease_owner',
  'lease_token',
  'lease_claim_id',
  'lease_expires_at',
  'claimed_at',
  'lease_extensions',
  'holds_key_slot',
  'holds_queue_slot',
];

const settings: QueueClaimSettingsRow = {
  limit: null,
  aging: false,
  throttled: false,
  perKeyRate: false,
  fair: false,
};

describe('the claim composed from fragments', () => {
  it("sends the plain queue's claim exactly as recorded, routed and unrouted", () => {
    for (const label of ['claim_jobs', 'claim_jobs_unrouted']) {
      const statement = STATEMENTS[label]!(SCHEMA);
      expect(statement.text).toBe(RECORDED[label]!.text);
      expect(statement.name).toBe(RECORDED[label]!.name);
    }
  });

  it('sends every limited and round-robin claim, and each twin for a schema before 027, exactly as recorded', () => {
    expect(Object.keys(STATEMENTS).sort()).toEqual(Object.keys(RECORDED).sort());
    for (const [label, statement] of Object.entries(STATEMENTS)) {
      expect({ label, text: statement(SCHEMA).text }).toEqual({ label, text: RECORDED[label]!.text });
      expect(statement(SCHEMA).label).toBe(label);
    }
  });

  it("a plain queue's claim carries no limit's or fairness's fragment; each of theirs carries its own", () => {
    for (const plain of [JobClaimMany(SCHEMA), JobClaimManyUnrouted(SCHEMA)]) {
      for (const table of FEATURE_TABLES) expect(plain.text).not.toContain(table);
      expect(plain.text).toContain('lease_token = j.lease_token + 1'); // the fence's token, still
    }
    expect(JobClaimManyLimited(SCHEMA).text).toContain('concurrency_keys');
    expect(JobClaimManyThrottled(SCHEMA).text).toContain('rate_limit_keys');
    expect(JobClaimManyFair(SCHEMA).text).toContain('fair_turns');
    expect(JobClaimManyLimitedFair(SCHEMA).text).toContain('fair_turns');
    expect(JobClaimManyLimitedFair(SCHEMA).text).toContain('concurrency_keys');
  });

  it("a plain queue's claim is the gate, the window, the grant and the returned columns, nothing else", () => {
    const lanes = ['claimed_0', 'claimed_1', 'claimed_2', 'claimed_3', 'claimed'];
    for (const [statement, ctes] of [
      [JobClaimMany(SCHEMA), ['candidate', ...lanes]],
      [JobClaimManyUnrouted(SCHEMA), ['candidate', 'claimed']],
    ] as const) {
      const { text } = statement;
      // The window (`candidate`) and the grant (`claimed`, one per lane when routed): no other CTE.
      expect(cteNames(text)).toEqual(ctes);
      // The jobs it claims, and the queue's row its gate reads: no other table.
      expect(new Set([...text.matchAll(/"leasehold"\.(\w+)/g)].map((m) => m[1]))).toEqual(
        new Set(['jobs', 'queues']),
      );
      expect(text).toContain('SELECT 1 FROM "leasehold".queues\n        WHERE name = $1\n');
      // Each grant sets what every grant sets, and returns ClaimedRow's columns, no more.
      const grants = ctes.length - (ctes.length > 2 ? 2 : 1);
      expect([...text.matchAll(/^\s+(?:SET )?(\w+) = /gm)].map((m) => m[1])).toEqual(
        Array.from({ length: grants }, () => GRANT_SETS).flat(),
      );
      expect(returnedNames(text)).toEqual(Array.from({ length: grants }, () => CLAIMED_ROW));
      expect(text.trimEnd().endsWith('\n  SELECT * FROM claimed')).toBe(true);
    }
  });

  it('every claim returns the job identity: by its column, and in the twins without naming it', () => {
    for (const label of Object.keys(STATEMENTS)) {
      const { text } = STATEMENTS[label]!(SCHEMA);
      const twin = label.endsWith('_any_schema') || label === 'claim_jobs_unrouted';
      // The grants' lists (a limit's own writes return their rows' columns).
      const grants = returnedNames(text).filter((names) => names[0] === 'id');
      expect(grants.length).toBeGreaterThan(0);
      for (const names of grants) expect(names.slice(0, CLAIMED_ROW.length)).toEqual(CLAIMED_ROW);
      expect({ label, named: /\bj\.job_uid\b/.test(text) }).toEqual({ label, named: !twin });
      expect({ label, read: text.includes("(to_jsonb(j) ->> 'job_uid')::uuid AS job_uid") }).toEqual({
        label,
        read: twin,
      });
    }
  });

  it("chooses a queue's shape from its settings, fairness first, then a throttle, then a per-key limit", () => {
    const cases: [Partial<QueueClaimSettingsRow>, ClaimShape][] = [
      [{}, { candidates: 'preference', limit: 'none' }],
      [{ aging: true }, { candidates: 'preference', limit: 'none' }],
      [{ limit: 2 }, { candidates: 'preference', limit: 'per-key' }],
      [{ throttled: true }, { candidates: 'preference', limit: 'throttle' }],
      [
        { throttled: true, perKeyRate: true },
        { candidates: 'preference', limit: 'throttle' },
      ],
      [{ fair: true }, { candidates: 'turns', limit: 'none' }],
      [
        { fair: true, limit: 2 },
        { candidates: 'turns', limit: 'per-key' },
      ],
    ];
    for (const [given, shape] of cases) expect(claimShapeOf({ ...settings, ...given })).toEqual(shape);
  });

  it('a router whose cache says plain claims a queue limited since with the limited statement, after one empty plain claim', async () => {
    const lh = await migratedClient();
    const { router, sent } = recordingRouter(lh.schema);
    await lh.enqueueMany(
      'went-limited',
      [1, 2, 3, 4, 5].map((n) => ({ payload: { n }, concurrencyKey: 'k' })),
    );
    const claim = () => router.claim({ queue: 'went-limited', owner: 'o', limit: 2, leaseMs: 30_000 });
    expect(await claim()).toHaveLength(2);
    expect(sent.splice(0)).toEqual([JobClaimMany(lh.schema).name]);
    // Another process sets a per-key limit of one; this router's cache still says plain.
    await lh.configureQueue('went-limited', { concurrencyLimitPerKey: 1 });
    const limited = await claim();
    expect(sent.splice(0)).toEqual([JobClaimMany(lh.schema).name, JobClaimManyLimited(lh.schema).name]);
    // The plain claims took no slot; the limited one took the key's only slot, and no more.
    expect(limited).toHaveLength(1);
    expect(await claim()).toEqual([]);
    expect(sent.splice(0)).toEqual([JobClaimManyLimited(lh.schema).name]);
  });

  it('a router whose cache says throttled claims plainly once the limit is cleared, in the same call', async () => {
    const lh = await migratedClient();
    const { router, sent } = recordingRouter(lh.schema);
    await lh.configureQueue('was-throttled', { rateLimit: { max: 1, perMs: 60_000 } });
    await lh.enqueueMany('was-throttled', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    const claim = () => router.claim({ queue: 'was-throttled', owner: 'o', limit: 2, leaseMs: 30_000 });
    expect(await claim()).toHaveLength(1);
    expect(router.throttled('was-throttled')?.by).toBe('rate');
    expect(sent.splice(0)).toEqual([JobClaimManyThrottled(lh.schema).name]);
    await lh.configureQueue('was-throttled', { rateLimit: null });
    expect(await claim()).toHaveLength(2);
    expect(router.throttled('was-throttled')).toBeNull();
    expect(sent.splice(0)).toEqual([JobClaimManyThrottled(lh.schema).name, JobClaimMany(lh.schema).name]);
  });
});

/** The names of the CTEs a statement defines, in order. */
function cteNames(text: string): string[] {
  return [...text.matchAll(/(?:WITH (?:RECURSIVE )?|,\n {2})(\w+) AS \(/g)].map((m) => m[1] as string);
}

/** The names each RETURNING list of `text` returns (a column's own name, or the name after AS). */
function returnedNames(text: string): string[][] {
  return text
    .split('RETURNING ')
    .slice(1)
    .map((rest) => {
      const items = [''];
      let depth = 0;
      for (const ch of rest) {
        if (ch === '(') depth++;
        if (ch === ')' && --depth < 0) break; // the CTE around the write ends
        if (ch === ',' && depth === 0) items.push('');
        else items[items.length - 1] += ch;
      }
      return items.map((item) => item.trim().match(/(?:^j\.|\bAS )(\w+)$/)?.[1] ?? item.trim());
    });
}

/** A claim router (claims from the front) on a pool that records the claim statements it sends. */
function recordingRouter(schema: string): { router: ClaimRouter; sent: string[] } {
  const pool = testPool(2);
  const sent: string[] = [];
  const recording: Queryable = {
    query: ((config: { name?: string }, values?: unknown[]) => {
      if (config.name?.includes('claim_jobs')) sent.push(config.name);
      return pool.query(config as pg.QueryConfig, values);
    }) as Queryable['query'],
  };
  return { router: new ClaimRouter(recording, schema, null), sent };
}
