import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { Leasehold } from '../../src/index.js';
import { directDatabaseUrl } from '../support/db.js';

// The chaos checker on planted histories: each anomaly it claims to catch is written into an
// otherwise clean run, and the rule for it must break, while the clean run keeps every rule. A
// checker rule that never fires proves nothing, so each planted case is that rule's negative control.

interface Rule {
  name: string;
  ok: boolean;
}
type Facts = Record<string, unknown>;
const checker = (await import('../../chaos/checker/checker.mjs' as string)) as {
  check(
    db: pg.Client,
    settings: { leaseMs: number; recoveryIntervalMs: number; toleranceMs: number },
  ): Promise<Facts>;
};
const report = (await import('../../chaos/checker/report.mjs' as string)) as {
  invariants(facts: Facts, run: unknown): Rule[];
};
const schema = (await import('../../chaos/records/schema.mjs' as string)) as {
  createChaosSchema(db: pg.Client): Promise<void>;
};

const RULES = {
  lost: 'jobs lost (acknowledged, then gone without finishing)',
  stale: 'stale completions accepted',
  twice: 'completions accepted per claim (most)',
  other: 'acknowledged jobs that ended neither succeeded nor dead (cancelled, or a status unknown here)',
  sharedKey: 'idempotency keys shared by two jobs (a downstream applies only the first)',
  ledger: 'effects-ledger effects not exactly once',
};

// What only the harness sees (producer errors, nemesis): nothing went wrong there.
const RUN = {
  requestedKinds: [],
  producer: { errors: { untyped: 0, total: 0 }, slowestMs: 0 },
  workerFailures: [],
};

const databases: string[] = [];
afterAll(async () => {
  const admin = new pg.Client({ connectionString: directDatabaseUrl() });
  await admin.connect();
  try {
    for (const name of databases) await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
});

/**
 * A fresh database with Leasehold in schema `leasehold` (the checker's fixed name) and the chaos
 * ledger, holding a clean history: one job enqueued, acknowledged, run once and completed.
 * `plant` then damages it; returns the broken rule names.
 */
async function brokenRules(
  plant?: (ctx: Planted) => Promise<void>,
  inspect?: (facts: Facts) => void,
): Promise<string[]> {
  const name = `lh_chaos_check_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: directDatabaseUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  databases.push(name);
  const url = new URL(directDatabaseUrl());
  url.pathname = `/${name}`;
  const lh = new Leasehold({ connectionString: url.toString(), schema: 'leasehold' });
  const db = new pg.Client({ connectionString: url.toString() });
  await db.connect();
  try {
    await lh.migrate();
    await schema.createChaosSchema(db);
    const { id } = await lh.enqueue('chaos', {});
    await db.query(`INSERT INTO chaos.acked VALUES ($1, 'chaos', 'bare', 0)`, [id]);
    const [lease] = await lh.claim({ queue: 'chaos', owner: 'w1-a' });
    const claim = { id, token: lease!.token, owner: 'w1-a' };
    await db.query(
      `INSERT INTO chaos.runs (seq, job_id, token, owner, queue, attempt, max_attempts)
       VALUES ('r1', $1, $2, $3, 'chaos', 1, 5)`,
      [id, claim.token, claim.owner],
    );
    await db.query(
      `INSERT INTO chaos.run_ends (seq, job_id, token, owner, duration_ms, outcome)
       VALUES ('e1', $1, $2, $3, 5, 'returned')`,
      [id, claim.token, claim.owner],
    );
    expect(await lh.complete(lease!)).toBe(true);
    await db.query(
      `INSERT INTO chaos.acks (seq, job_id, token, owner, result) VALUES ('a1', $1, $2, $3, 'completed')`,
      [id, claim.token, claim.owner],
    );
    await plant?.({ db, lh, claim });
    const facts = await checker.check(db, { leaseMs: 2000, recoveryIntervalMs: 500, toleranceMs: 250 });
    inspect?.(facts);
    return report
      .invariants(facts, RUN)
      .filter((rule) => !rule.ok)
      .map((rule) => rule.name);
  } finally {
    await db.end();
    await lh.close();
  }
}

interface Planted {
  db: pg.Client;
  lh: Leasehold;
  claim: { id: string; token: string; owner: string };
}

describe('the chaos checker on planted histories', () => {
  it('keeps every rule on a clean history', async () => {
    expect(await brokenRules()).toEqual([]);
  });

  it('flags a lost job: acknowledged, then gone without finishing', async () => {
    const broken = await brokenRules(async ({ db, lh }) => {
      const { id } = await lh.enqueue('chaos', {});
      await db.query(`INSERT INTO chaos.acked VALUES ($1, 'chaos', 'bare', 0)`, [id]);
      await db.query('DELETE FROM leasehold.jobs WHERE id = $1', [id]);
    });
    expect(broken).toContain(RULES.lost);
  });

  it('flags a stale completion accepted: a later claim of the job ran', async () => {
    const broken = await brokenRules(async ({ db, claim }) => {
      await db.query(
        `INSERT INTO chaos.runs (seq, job_id, token, owner, queue, attempt, max_attempts)
         VALUES ('r2', $1, $2::bigint + 1, 'w2-b', 'chaos', 2, 5)`,
        [claim.id, claim.token],
      );
    });
    expect(broken).toContain(RULES.stale);
  });

  it('flags a stale completion accepted: the claim had already been ended by the sweep', async () => {
    const broken = await brokenRules(async ({ db, claim }) => {
      await db.query(
        `INSERT INTO leasehold.job_events (job_id, queue_name, kind, lease_owner, lease_token)
         VALUES ($1, 'chaos', 'lease_expired', $2, $3)`,
        [claim.id, claim.owner, claim.token],
      );
    });
    expect(broken).toContain(RULES.stale);
  });

  it('flags two accepted completions of one claim', async () => {
    const broken = await brokenRules(async ({ db, claim }) => {
      await db.query(
        `INSERT INTO chaos.acks (seq, job_id, token, owner, result) VALUES ('a2', $1, $2, $3, 'completed')`,
        [claim.id, claim.token, claim.owner],
      );
    });
    expect(broken).toContain(RULES.twice);
  });

  it('flags an acknowledged job that ended neither succeeded nor dead', async () => {
    const broken = await brokenRules(async ({ db, lh }) => {
      const { id } = await lh.enqueue('chaos', {});
      await db.query(`INSERT INTO chaos.acked VALUES ($1, 'chaos', 'bare', 0)`, [id]);
      await lh.cancel(id, { reason: 'planted' });
    });
    expect(broken).toEqual([RULES.other]);
  });

  it('flags an effects-ledger job whose downstream was called twice, and names its calls in the facts', async () => {
    let samples: unknown;
    const broken = await brokenRules(
      async ({ db, claim }) => {
        await db.query(`UPDATE chaos.acked SET mode = 'effect' WHERE job_id = $1`, [claim.id]);
        for (const owner of ['w1-a', 'w2-b']) {
          await db.query(
            `INSERT INTO chaos.downstream_calls (key, job_id, token, owner, kind)
             VALUES ($1, $2, $3, $4, 'effect')`,
            [`leasehold:${claim.id}:downstream`, claim.id, claim.token, owner],
          );
        }
      },
      (facts) => {
        samples = (facts.effects as { ledgerSamples: unknown }).ledgerSamples;
      },
    );
    expect(broken).toEqual([RULES.ledger]);
    expect(samples).toMatchObject([
      { calls: [{ owner: 'w1-a' }, { owner: 'w2-b' }], events: [], completed_by: { owner: 'w1-a' } },
    ]);
  });

  // Issue 31: after an asynchronous failover the promoted server can hand a lost job's id to a new
  // job; with keys made of the id alone, both call the downstream with one key. The producer's
  // reference (payload.ref) tells the two jobs apart.
  it('flags two jobs sharing an idempotency key, and not one job calling twice with its key', async () => {
    const call = (db: pg.Client, claim: Planted['claim'], ref: string) =>
      db.query(
        `INSERT INTO chaos.downstream_calls (key, job_id, token, owner, kind, job_ref)
         VALUES ($1, $2, $3, $4, 'plain', $5)`,
        [`leasehold:${claim.id}`, claim.id, claim.token, claim.owner, ref],
      );
    const shared = await brokenRules(async ({ db, claim }) => {
      await call(db, claim, 'p.1');
      await call(db, claim, 'p.2');
    });
    expect(shared).toEqual([RULES.sharedKey]);
    const repeated = await brokenRules(async ({ db, claim }) => {
      await call(db, claim, 'p.1');
      await call(db, claim, 'p.1');
    });
    expect(repeated).toEqual([]);
  });
});
