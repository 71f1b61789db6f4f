import { describe, expect, it } from 'vitest';
import type { Lease, Leasehold } from '../../src/index.js';
import { awaitSenders, beginWait, resolveWait } from '../../src/storage/flows/events.js';
import { recordStep } from '../../src/storage/flows/steps.js';
import { migratedClient, testPool } from '../support/db.js';

// The steps rules of the chaos checker (chaos/steps-checker.mjs, the `--steps` workload) on planted
// histories: a clean workflow keeps every rule, and each planted anomaly breaks the rule written
// for it (its negative control). Steps are recorded by the library's own fenced statement; so are
// the waits of the events rules (chaos/events-checker.mjs), and their events sent by lh.sendEvent.

type Facts = Record<string, number>;
const steps = (await import('../../chaos/checker/steps-checker.mjs' as string)) as {
  checkSteps(db: unknown, steps: number, schemas: { leasehold: string; ledger: string }): Promise<Facts>;
  stepInvariants(facts: Facts): { name: string; ok: boolean }[];
};

const RULES = {
  notEnded: 'workflows that ended neither succeeded nor dead',
  twice: 'steps recorded twice (one job, one step name)',
  notOnce: 'recorded steps whose value is not in exactly one effect run, by the recording claim',
  again: 'recorded steps whose effect a later claim ran again',
  incomplete: 'succeeded workflows missing a step record',
  stale:
    'steps and sleeps recorded by a stale lease (never ran, after a later claim ran, after the claim ended)',
  none: 'steps recorded (the workload really ran steps)',
};

const events = (await import('../../chaos/checker/events-checker.mjs' as string)) as {
  checkEvents(db: unknown, schemas: { leasehold: string; ledger: string }): Promise<Facts>;
  eventInvariants(facts: Facts): { name: string; ok: boolean }[];
};

const EVENT_RULES = {
  unresolved: 'succeeded waiting workflows whose wait did not end (no wait, or neither woken nor timed out)',
  left: 'waiting rows left behind by succeeded workflows',
  before: 'waits timed out although their event was sent before the workflow was enqueued',
  after: 'waits timed out although their event was sent over 1 s before the timeout',
  never: 'waits woken although their event was never sent',
  payload: 'woken waits holding no payload of an event sent with their key',
  again: 'recorded steps of woken workflows that a later claim ran again',
  woken: 'waits woken by an event (the workload really waited)',
  timedOut: 'waits timed out (the timeout path really ran)',
};

async function setup() {
  const lh = await migratedClient();
  const pool = testPool(2);
  const schema = lh.schema;
  const ledger = `${schema}_ledger`;
  // The schema pool may hand this schema on from a file that made a ledger beside it too.
  await pool.query(`DROP SCHEMA IF EXISTS "${ledger}" CASCADE`);
  await pool.query(`CREATE SCHEMA "${ledger}"`);
  await pool.query(`
    CREATE TABLE "${ledger}".acked (job_id bigint PRIMARY KEY, mode text NOT NULL, event_key text, event_plan text);
    CREATE TABLE "${ledger}".runs (job_id bigint NOT NULL, token bigint NOT NULL,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp());
    CREATE TABLE "${ledger}".step_effects (job_id bigint NOT NULL, step text NOT NULL, token bigint NOT NULL,
      value text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());`);
  const { id } = await lh.enqueue('chaos', { mode: 'steps' });
  await pool.query(`INSERT INTO "${ledger}".acked VALUES ($1, 'steps')`, [id]);
  const claim = async (): Promise<Lease> => {
    const [lease] = await lh.claim({ queue: 'chaos', owner: 'w1-a' });
    return lease as Lease;
  };
  const ran = (lease: Lease, at = 'clock_timestamp()') =>
    pool.query(`INSERT INTO "${ledger}".runs (job_id, token, started_at) VALUES ($1, $2, ${at})`, [
      lease.jobId,
      lease.token,
    ]);
  const effect = (lease: Lease, step: string, value: string, token = lease.token) =>
    pool.query(`INSERT INTO "${ledger}".step_effects (job_id, step, token, value) VALUES ($1, $2, $3, $4)`, [
      lease.jobId,
      step,
      token,
      value,
    ]);
  // A step as the workload runs it: its effect in the ledger, then its value recorded under the fence.
  const step = async (lease: Lease, seq: number, value = `v${seq}-${lease.token}`, withEffect = true) => {
    if (withEffect) await effect(lease, `s${seq}#0`, value);
    const done = await recordStep(pool, schema, lease, seq, `s${seq}#0`, {
      kind: 'step',
      resultJson: JSON.stringify(value),
    });
    expect(done).toMatchObject({ held: true, recorded: true });
  };
  const broken = async (count = 2) => {
    const facts = await steps.checkSteps(pool, count, { leasehold: schema, ledger });
    return {
      facts,
      broken: steps
        .stepInvariants(facts)
        .filter((rule) => !rule.ok)
        .map((rule) => rule.name),
    };
  };
  return { lh, pool, schema, ledger, id, claim, ran, effect, step, broken };
}

// A workflow of two steps run by one claim and completed.
async function cleanRun(ctx: Awaited<ReturnType<typeof setup>>, lh: Leasehold = ctx.lh): Promise<Lease> {
  const lease = await ctx.claim();
  await ctx.ran(lease);
  await ctx.step(lease, 0);
  await ctx.step(lease, 1);
  expect(await lh.complete(lease)).toBe(true);
  return lease;
}

describe('the chaos checker: steps rules on planted histories', () => {
  it('keeps every rule on a clean history, resumed by a second claim after a failure', async () => {
    const ctx = await setup();
    const first = await ctx.claim();
    await ctx.ran(first);
    await ctx.step(first, 0);
    // A retry: the step recorded is not run again; the second claim runs the next.
    expect(await ctx.lh.fail(first, new Error('crash'), { delayMs: 0 })).toBe('retry');
    const second = await ctx.claim();
    await ctx.ran(second);
    await ctx.step(second, 1);
    expect(await ctx.lh.complete(second)).toBe(true);
    expect(await ctx.broken()).toEqual({
      facts: expect.objectContaining({ workflows: 1, succeeded: 1, recorded_steps: 2, not_once: 0 }),
      broken: [],
    });
  });

  it('flags a recorded value the ledger holds twice, none, or from another claim', async () => {
    for (const plant of ['twice', 'none', 'other-claim'] as const) {
      const ctx = await setup();
      const lease = await ctx.claim();
      await ctx.ran(lease);
      await ctx.step(lease, 0, 'x', plant !== 'none' && plant !== 'other-claim');
      if (plant === 'twice') await ctx.effect(lease, 's0#0', 'x');
      if (plant === 'other-claim') await ctx.effect(lease, 's0#0', 'x', String(BigInt(lease.token) + 1n));
      await ctx.step(lease, 1);
      expect(await ctx.lh.complete(lease)).toBe(true);
      expect((await ctx.broken()).broken).toEqual(
        plant === 'other-claim' ? [RULES.notOnce, RULES.again] : [RULES.notOnce],
      );
    }
  });

  it('flags a recorded step whose effect a later claim ran again', async () => {
    const ctx = await setup();
    const lease = await cleanRun(ctx);
    await ctx.effect(lease, 's1#0', 'again', String(BigInt(lease.token) + 1n));
    expect((await ctx.broken()).broken).toEqual([RULES.again]);
  });

  it('flags a succeeded workflow missing a step, and a workflow that never ended', async () => {
    const ctx = await setup();
    await cleanRun(ctx);
    expect((await ctx.broken(3)).broken).toEqual([RULES.incomplete]);
    const { id } = await ctx.lh.enqueue('chaos', { mode: 'steps' });
    await ctx.pool.query(`INSERT INTO "${ctx.ledger}".acked VALUES ($1, 'steps')`, [id]);
    expect((await ctx.broken()).broken).toEqual([RULES.notEnded]);
  });

  it('flags a step name recorded twice in one job', async () => {
    const ctx = await setup();
    const lease = await cleanRun(ctx);
    await ctx.pool.query(
      `INSERT INTO "${ctx.schema}".job_steps (job_id, seq, name, kind, result, attempt, lease_token)
       VALUES ($1, 2, 's1#0', 'step', '"v1-${lease.token}"', 1, $2)`,
      [lease.jobId, lease.token],
    );
    expect((await ctx.broken()).broken).toContain(RULES.twice);
  });

  it('flags a step recorded by a claim that never ran, or after a later claim ran', async () => {
    for (const plant of ['never-ran', 'later-claim'] as const) {
      const ctx = await setup();
      const lease = await ctx.claim();
      if (plant === 'later-claim') {
        await ctx.ran(lease);
        await ctx.pool.query(
          `INSERT INTO "${ctx.ledger}".runs (job_id, token, started_at) VALUES ($1, $2, clock_timestamp() - interval '1 second')`,
          [lease.jobId, String(BigInt(lease.token) + 1n)],
        );
      }
      await ctx.step(lease, 0);
      await ctx.step(lease, 1);
      expect(await ctx.lh.complete(lease)).toBe(true);
      const { facts, broken } = await ctx.broken();
      expect(broken).toEqual([RULES.stale]);
      expect(plant === 'never-ran' ? facts.stale_never_ran : facts.stale_after_later_claim).toBe(2);
    }
  });

  it("flags a step recorded after its own claim had ended (its event after the claim's end)", async () => {
    const ctx = await setup();
    const first = await ctx.claim();
    await ctx.ran(first);
    await ctx.step(first, 0);
    expect(await ctx.lh.fail(first, new Error('crash'), { delayMs: 0 })).toBe('retry');
    // What the fence refuses, written behind its back: the ended claim records step 1.
    await ctx.effect(first, 's1#0', 'late');
    await ctx.pool.query(
      `WITH st AS (
         INSERT INTO "${ctx.schema}".job_steps (job_id, seq, name, kind, result, attempt, lease_token)
         VALUES ($1, 1, 's1#0', 'step', '"late"', 1, $2) RETURNING job_id)
       INSERT INTO "${ctx.schema}".job_events (job_id, queue_name, kind, attempt, lease_owner, lease_token, lease_claim_id, detail)
       SELECT job_id, 'chaos', 'step', 1, 'w1-a', $2, $3, '{"step": "s1#0", "kind": "step"}' FROM st`,
      [first.jobId, first.token, first.claimId],
    );
    const second = await ctx.claim();
    await ctx.ran(second);
    expect(await ctx.lh.complete(second)).toBe(true);
    const { facts, broken } = await ctx.broken();
    expect(broken).toEqual([RULES.stale]);
    expect(facts).toMatchObject({
      stale_after_claim_ended: 1,
      stale_never_ran: 0,
      stale_after_later_claim: 0,
    });
  });

  it('flags a run that recorded no step at all', async () => {
    const ctx = await setup();
    const lease = await ctx.claim();
    await ctx.ran(lease);
    expect(await ctx.lh.complete(lease)).toBe(true);
    expect((await ctx.broken()).broken).toEqual([RULES.incomplete, RULES.none]);
  });
});

type Ctx = Awaited<ReturnType<typeof setup>>;
type Plan = 'before' | 'after' | 'never';

/**
 * A waiting workflow as the workload runs it, on a queue of its own: step 0, the wait for event
 * `chaos.go` with key `key` (its event sent before the enqueue or during the wait, as `plan`
 * says, unless `send` says otherwise), then step 2, completed. Returns its lease and key.
 */
async function waitingRun(
  ctx: Ctx,
  plan: Plan,
  { send = plan !== 'never', wait = true, timeoutMs = plan === 'never' ? 0 : 60_000 } = {},
): Promise<{ lease: Lease; key: string }> {
  const key = `wf-${plan}-${Math.random().toString(36).slice(2)}`;
  const event = () => ctx.lh.sendEvent('chaos.go', { key, payload: { key, value: `${key}:1` } });
  if (send && plan === 'before') await event();
  const { id } = await ctx.lh.enqueue('chaos_wait', { mode: 'steps' });
  await ctx.pool.query(`INSERT INTO "${ctx.ledger}".acked VALUES ($1, 'steps', $2, $3)`, [id, key, plan]);
  const [lease] = (await ctx.lh.claim({ queue: 'chaos_wait', owner: 'w1-a' })) as Lease[];
  if (!lease) throw new Error('no waiting workflow to claim');
  await ctx.ran(lease);
  await ctx.step(lease, 0);
  if (wait) {
    const begun = await beginWait(ctx.pool, ctx.schema, lease, {
      seq: 1,
      key: 'chaos.go#0',
      name: 'chaos.go',
      eventKey: key,
      timeoutMs,
    });
    expect(begun).toEqual({ held: true, recorded: true });
    if (send && plan !== 'before') await event();
    await awaitSenders(ctx.pool, ctx.schema, 'chaos.go', key);
    const ended = await resolveWait(ctx.pool, ctx.schema, lease, 1, 86_400_000);
    expect(ended.result).toEqual(
      send ? { timedOut: false, payload: { key, value: `${key}:1` } } : { timedOut: true },
    );
  }
  await ctx.step(lease, 2);
  expect(await ctx.lh.complete(lease)).toBe(true);
  return { lease, key };
}

async function brokenEvents(ctx: Ctx) {
  const facts = await events.checkEvents(ctx.pool, { leasehold: ctx.schema, ledger: ctx.ledger });
  const broken = events
    .eventInvariants(facts)
    .filter((rule) => !rule.ok)
    .map((rule) => rule.name);
  return { facts, broken };
}

describe('the chaos checker: events rules on planted histories', () => {
  it('keeps every rule when events sent before, during and never end their waits', async () => {
    const ctx = await setup();
    for (const plan of ['before', 'after', 'never'] as const) await waitingRun(ctx, plan);
    expect(await brokenEvents(ctx)).toEqual({
      facts: expect.objectContaining({
        waiting_workflows: 3,
        waits_recorded: 3,
        woken: 2,
        woken_by_earlier_event: 1,
        timed_out: 1,
      }),
      broken: [],
    });
  });

  it('flags a wait that timed out although its event was sent before, or long before the timeout', async () => {
    for (const plan of ['before', 'after'] as const) {
      const ctx = await setup();
      await waitingRun(ctx, 'after');
      const { key } = await waitingRun(ctx, plan, { send: false, timeoutMs: 0 });
      // What a lost wake would leave: the event stored an hour before the wait timed out.
      await ctx.pool.query(
        `INSERT INTO "${ctx.schema}".job_events_sent (name, key, payload, sent_at)
         VALUES ('chaos.go', $1, '{}', now() - interval '1 hour')`,
        [key],
      );
      expect((await brokenEvents(ctx)).broken).toEqual([
        plan === 'before' ? EVENT_RULES.before : EVENT_RULES.after,
      ]);
    }
  });

  it('flags a wait woken by an event never meant to be sent, and a payload no event of its key had', async () => {
    const ctx = await setup();
    await waitingRun(ctx, 'never');
    await waitingRun(ctx, 'never', { send: true, timeoutMs: 60_000 });
    expect((await brokenEvents(ctx)).broken).toEqual([EVENT_RULES.never]);
    const other = await setup();
    await waitingRun(other, 'never');
    const { lease } = await waitingRun(other, 'before');
    await other.pool.query(
      `UPDATE "${other.schema}".job_steps SET result = '{"timedOut": false, "payload": {"value": "forged"}}'
       WHERE job_id = $1 AND kind = 'wait'`,
      [lease.jobId],
    );
    expect((await brokenEvents(other)).broken).toEqual([EVENT_RULES.payload]);
  });

  it('flags a succeeded waiting workflow that never waited, and a waiting row left behind', async () => {
    const ctx = await setup();
    await waitingRun(ctx, 'before');
    await waitingRun(ctx, 'never');
    const { lease } = await waitingRun(ctx, 'after', { send: false, wait: false });
    expect((await brokenEvents(ctx)).broken).toEqual([EVENT_RULES.unresolved]);
    await ctx.pool.query(
      `INSERT INTO "${ctx.schema}".job_waits (job_id, seq, name, key) VALUES ($1, 1, 'chaos.go', 'k')`,
      [lease.jobId],
    );
    expect((await brokenEvents(ctx)).broken).toEqual([EVENT_RULES.unresolved, EVENT_RULES.left]);
  });

  it('flags a recorded step of a woken workflow run again by a later claim', async () => {
    const ctx = await setup();
    await waitingRun(ctx, 'never');
    const { lease } = await waitingRun(ctx, 'after');
    await ctx.effect(lease, 's0#0', 'again', String(BigInt(lease.token) + 1n));
    expect((await brokenEvents(ctx)).broken).toEqual([EVENT_RULES.again]);
  });

  it('flags a run in which no wait was woken, and one in which none timed out', async () => {
    const ctx = await setup();
    await waitingRun(ctx, 'never');
    expect((await brokenEvents(ctx)).broken).toEqual([EVENT_RULES.woken]);
    const other = await setup();
    await waitingRun(other, 'before');
    expect((await brokenEvents(other)).broken).toEqual([EVENT_RULES.timedOut]);
  });
});
