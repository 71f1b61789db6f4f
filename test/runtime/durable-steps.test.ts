import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  type BatchJobContext,
  type JobContext,
  Leasehold,
  LeaseLostError,
  PermanentError,
  StepOrderError,
  ValidationError,
} from '../../src/index.js';
import { runCliInProcess } from '../support/cli-inprocess.js';
import { databaseUrl, expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { roleClient } from '../support/roles.js';
import { deferred, forkWorker, killHard, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

async function stepRows(pool: ReturnType<typeof testPool>, schema: string, id: string) {
  const { rows } = await pool.query<{ seq: number; name: string; kind: string; result: unknown }>(
    `SELECT seq, name, kind, result FROM "${schema}".job_steps WHERE job_id = $1 ORDER BY seq`,
    [id],
  );
  return rows;
}

describe('durable steps', () => {
  it('a worker SIGKILLed between steps: the next holder resumes at the next step and runs no recorded step again', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    await pool.query(
      `CREATE TABLE "${lh.schema}".step_calls (job_id bigint NOT NULL, step text NOT NULL, caller text NOT NULL)`,
    );
    const { id } = await lh.enqueue('signup', {});
    const victim = await forkWorker({
      schema: lh.schema,
      queue: 'signup',
      mode: 'steps',
      hangAfter: 'b',
      // Long enough that a loaded machine does not lose it mid-step (which would run a step twice
      // for another reason than the one under test); the survivor waits it out after the kill.
      leaseMs: 1500,
      owner: 'victim',
    });
    await waitFor(() => victim.messages.some((m) => m.type === 'step' && m.name === 'b'), {
      what: 'the child recorded step b',
    });
    await killHard(victim.child);

    const survivor = lh.worker({
      owner: 'survivor',
      queues: {
        signup: async (job) => {
          const results = [];
          for (const name of ['a', 'b', 'c']) {
            results.push(
              await job.step(name, async () => {
                await pool.query(
                  `INSERT INTO "${lh.schema}".step_calls (job_id, step, caller) VALUES ($1, $2, 'survivor')`,
                  [job.id, name],
                );
                return { name, by: 'survivor' };
              }),
            );
          }
          return results;
        },
      },
      recoveryIntervalMs: 100,
      pollIntervalMs: 50,
    });
    await started(survivor);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', {
      timeoutMs: 20_000,
      what: 'the job succeeded after the crash',
    });
    const { rows } = await pool.query<{ step: string; caller: string; n: number }>(
      `SELECT step, caller, count(*)::int AS n FROM "${lh.schema}".step_calls GROUP BY step, caller ORDER BY step`,
    );
    // Each step ran exactly once: a and b in the killed child, c in the survivor.
    expect(rows).toEqual([
      { step: 'a', caller: 'child', n: 1 },
      { step: 'b', caller: 'child', n: 1 },
      { step: 'c', caller: 'survivor', n: 1 },
    ]);
    const job = await lh.getJob(id);
    expect(job).toMatchObject({ attemptCount: 2 });
    // The recorded results came back as stored: the survivor returned the child's a and b.
    expect(job!.result).toEqual([
      { name: 'a', by: 'child' },
      { name: 'b', by: 'child' },
      { name: 'c', by: 'survivor' },
    ]);
    expect((await stepRows(pool, lh.schema, id)).map((r) => r.name)).toEqual(['a#0', 'b#0', 'c#0']);
  });

  it('a holder whose lease was taken over cannot record its step: refused, counted, and the new holder runs it under its own claim', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const gates = new Map([
      [1, deferred()],
      [2, deferred()],
    ]);
    const runs: number[] = [];
    const errors: unknown[] = [];
    const { id } = await lh.enqueue('charge', {});
    const worker = lh.worker({
      queues: {
        charge: {
          concurrency: 2,
          leaseMs: 2000,
          handler: async (job: JobContext) => {
            try {
              return await job.step('charge', async () => {
                runs.push(job.attempt);
                await gates.get(job.attempt)?.promise;
                return { chargedBy: job.attempt };
              });
            } catch (err) {
              errors.push(err);
              throw err;
            }
          },
        },
      },
      recoveryIntervalMs: 0,
      pollIntervalMs: 20,
      shutdownTimeoutMs: 500,
    });
    await started(worker);
    await waitFor(() => runs.length === 1, { what: 'the first holder running its step' });
    // Its lease lapses (database time) and is recovered: the job is claimed again, and the new
    // holder runs the step under its own claim (held at its gate, the job running).
    await expireLease(pool, lh.schema, id);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    await waitFor(() => runs.length === 2, { what: 'the new holder running the step' });
    expect(runs).toEqual([1, 2]);
    // The stale holder's step finishes now, while the new holder runs: refused, nothing written.
    gates.get(1)?.resolve();
    await waitFor(() => errors.length === 1, { what: 'the stale step refused' });
    expect(errors[0]).toBeInstanceOf(LeaseLostError);
    expect((errors[0] as Error).message).toContain('charge#0');
    expect(await stepRows(pool, lh.schema, id)).toEqual([]);
    const refusals = (await lh.leaseRefusals()).filter((r) => r.operation === 'step');
    expect(refusals.map((r) => [r.queue, r.count])).toEqual([['charge', 1]]);
    // The new holder records its own result and completes.
    gates.get(2)?.resolve();
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', {
      what: 'the new holder recorded the step and completed',
    });
    expect(errors).toHaveLength(1);
    expect(await stepRows(pool, lh.schema, id)).toEqual([
      { seq: 0, name: 'charge#0', kind: 'step', result: { chargedBy: 2 } },
    ]);
    expect((await lh.getJob(id))!.result).toEqual({ chargedBy: 2 });
    const history = (await lh.getJob(id, { history: true }))!.history;
    expect(history.some((e) => e.kind === 'refused' && e.operation === 'step')).toBe(true);
    expect(history.filter((e) => e.kind === 'step').map((e) => e.attempt)).toEqual([2]);
  });

  it('a sleep hands the job back holding no lease and spending no attempt, then resumes past the steps before it', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const calls = { before: 0, after: 0 };
    const { id } = await lh.enqueue('nap', {});
    const queues = {
      nap: async (job: JobContext) => {
        const before = await job.step('before', () => ++calls.before);
        await job.sleep('nap', 2000);
        const after = await job.step('after', () => ++calls.after);
        return { before, after };
      },
    };
    const first = lh.worker({ queues, pollIntervalMs: 50 });
    const outcomes: string[] = [];
    first.on('outcome', (_job, outcome) => outcomes.push(outcome));
    await started(first);
    await waitFor(() => outcomes.includes('snoozed'), { what: 'the job handed back by its sleep' });
    // Stopped while the job sleeps, so that nothing can claim it while we look: it holds no lease.
    await first.stop();
    expect(outcomes).toEqual(['snoozed']);
    const asleep = await pool.query(
      `SELECT j.status::text, j.attempt_count, j.lease_owner, j.lease_expires_at,
              j.available_at >= s.wake_at - interval '5 ms' AS waits_for_wake,
              s.wake_at > now() AS still_asleep
       FROM "${lh.schema}".jobs AS j JOIN "${lh.schema}".job_steps AS s ON s.job_id = j.id AND s.kind = 'sleep'
       WHERE j.id = $1`,
      [id],
    );
    expect(asleep.rows[0]).toMatchObject({
      status: 'pending',
      attempt_count: 0,
      lease_owner: null,
      lease_expires_at: null,
      waits_for_wake: true,
    });
    await started(lh.worker({ queues, pollIntervalMs: 50 }));
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', {
      timeoutMs: 20_000,
      what: 'the job woke and finished',
    });
    expect(calls).toEqual({ before: 1, after: 1 });
    const job = await lh.getJob(id);
    expect(job).toMatchObject({ attemptCount: 1, result: { before: 1, after: 1 } });
    const woke = await pool.query(
      `SELECT f.finished_at >= s.wake_at AS after_wake
       FROM "${lh.schema}".finished_jobs AS f JOIN "${lh.schema}".job_steps AS s ON s.job_id = f.id
       WHERE f.id = $1 AND s.kind = 'sleep'`,
      [id],
    );
    expect(woke.rows).toEqual([{ after_wake: true }]);
    expect((await stepRows(pool, lh.schema, id)).map((r) => [r.name, r.kind])).toEqual([
      ['before#0', 'step'],
      ['nap#0', 'sleep'],
      ['after#0', 'step'],
    ]);
    // The history shows each step where it happened: both before the snooze, one after the wake.
    const history = (await lh.getJob(id, { history: true }))!.history;
    expect(history.map((e) => (e.kind === 'step' ? (e.detail as { step: string }).step : e.kind))).toEqual([
      'enqueued',
      'claimed',
      'before#0',
      'nap#0',
      'snoozed',
      'claimed',
      'after#0',
      'completed',
    ]);
    const nap = history.find((e) => e.kind === 'step' && (e.detail as { kind: string }).kind === 'sleep');
    expect(nap).toMatchObject({ attempt: 1, detail: { step: 'nap#0', kind: 'sleep' } });
    expect(typeof (nap!.detail as { wakeAt: unknown }).wakeAt).toBe('string');
    // `leasehold jobs show` prints each step by name, and the sleep with its wake time.
    const shown = await runCliInProcess([
      'jobs',
      'show',
      id,
      '--database-url',
      databaseUrl(),
      '--schema',
      lh.schema,
    ]);
    expect(shown.code).toBe(0);
    // The sleep spent no attempt: the step after it is attempt 1 again, under the next claim's token.
    expect(shown.stdout).toMatch(/step\s+1\s+\S+\s+1\s+step before#0 recorded/);
    expect(shown.stdout).toMatch(/step\s+1\s+\S+\s+1\s+sleep nap#0 until \S+/);
    expect(shown.stdout).toMatch(/step\s+1\s+\S+\s+2\s+step after#0 recorded/);
  });

  it('a resume that calls steps in another order fails with STEP_ORDER, naming both, and runs nothing again', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const ran: string[] = [];
    const errors: unknown[] = [];
    const { id } = await lh.enqueue('reorder', {}, { maxAttempts: 5 });
    const worker = lh.worker({
      queues: {
        reorder: async (job) => {
          const order = job.attempt === 1 ? ['a', 'b'] : ['b', 'a'];
          try {
            for (const name of order) await job.step(name, () => ran.push(`${name}@${job.attempt}`));
          } catch (err) {
            errors.push(err);
            throw err;
          }
          if (job.attempt === 1) throw new Error('fails after its steps');
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(id))?.status === 'dead', { what: 'dead' });
    expect(ran).toEqual(['a@1', 'b@1']);
    expect(errors.at(-1)).toBeInstanceOf(StepOrderError);
    expect(errors.at(-1)).toMatchObject({ code: 'STEP_ORDER', recorded: 'a#0', called: 'b#0' });
    const job = await lh.getJob(id);
    expect(job).toMatchObject({ lastErrorCode: 'STEP_ORDER', attemptCount: 2 });
    expect(job!.lastErrorMessage).toContain('"a#0"');
    expect(job!.lastErrorMessage).toContain('"b#0"');
    // The steps stay as the first attempt recorded them.
    expect((await stepRows(pool, lh.schema, id)).map((r) => r.name)).toEqual(['a#0', 'b#0']);
  });

  it('repeated names are numbered in call order, and a recorded loop returns stored values on the next attempt', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const charged: string[] = [];
    const { id } = await lh.enqueue('loop', {}, { maxAttempts: 3 });
    const worker = lh.worker({
      queues: {
        loop: async (job) => {
          const receipts = [];
          for (const item of ['x', 'y', 'z']) {
            receipts.push(
              await job.step('charge', () => {
                charged.push(`${item}@${job.attempt}`);
                return `r-${item}-${job.attempt}`;
              }),
            );
          }
          if (job.attempt === 1) throw new Error('fails after the loop');
          return receipts;
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'succeeded' });
    expect(charged).toEqual(['x@1', 'y@1', 'z@1']);
    expect((await lh.getJob(id))!.result).toEqual(['r-x-1', 'r-y-1', 'r-z-1']);
    expect((await stepRows(pool, lh.schema, id)).map((r) => r.name)).toEqual([
      'charge#0',
      'charge#1',
      'charge#2',
    ]);
  });

  it('a step that throws follows the retry rules, with its error in the history, and runs again on the next attempt', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    let tries = 0;
    const { id } = await lh.enqueue('flaky', {}, { maxAttempts: 3 });
    const worker = lh.worker({
      queues: {
        flaky: async (job) => {
          await job.step('call', () => {
            tries++;
            if (job.attempt === 1)
              throw Object.assign(new Error('downstream timed out'), { code: 'DOWNSTREAM' });
            return 'ok';
          });
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'succeeded' });
    expect(tries).toBe(2);
    const job = await lh.getJob(id, { history: true });
    const retried = job!.history.filter((e) => e.kind === 'retried');
    expect(retried).toHaveLength(1);
    expect(retried[0]).toMatchObject({ errorCode: 'DOWNSTREAM' });
    expect(await stepRows(pool, lh.schema, id)).toEqual([
      { seq: 0, name: 'call#0', kind: 'step', result: 'ok' },
    ]);
  });

  it('names are validated and results bounded: nothing recorded, the oversized one dead with STEP_RESULT_TOO_LARGE', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const errors: unknown[] = [];
    const { id: badName } = await lh.enqueue('bounds', { kind: 'name' });
    const { id: big } = await lh.enqueue('bounds', { kind: 'big' });
    const worker = lh.worker({
      queues: {
        bounds: async (job: JobContext) => {
          const { kind } = job.payload as { kind: string };
          try {
            if (kind === 'name') await job.step('no spaces allowed', () => 1);
            else await job.step('big', () => 'x'.repeat(200));
          } catch (err) {
            errors.push(err);
            if (err instanceof ValidationError)
              throw new PermanentError('bad step name', { code: 'BAD_NAME' });
            throw err;
          }
        },
      },
      maxResultBytes: 100,
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(big))?.status === 'dead', { what: 'big dead' });
    await waitFor(async () => (await lh.getJob(badName))?.status === 'dead', { what: 'bad name dead' });
    expect(errors.some((e) => e instanceof ValidationError)).toBe(true);
    expect(await lh.getJob(big)).toMatchObject({ lastErrorCode: 'STEP_RESULT_TOO_LARGE' });
    expect(await stepRows(pool, lh.schema, big)).toEqual([]);
    expect(await stepRows(pool, lh.schema, badName)).toEqual([]);
  });

  it('step rows are deleted with the job by retention', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const { id } = await lh.enqueue('kept', {});
    const worker = lh.worker({
      queues: { kept: async (job) => job.step('one', () => 1) },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'succeeded' });
    expect(await stepRows(pool, lh.schema, id)).toHaveLength(1);
    await pool.query(
      `UPDATE "${lh.schema}".finished_jobs SET finished_at = now() - interval '30 days' WHERE id = $1`,
      [id],
    );
    expect(await lh.prune()).toMatchObject({ succeeded: 1 });
    expect(await lh.getJob(id)).toBeNull();
    expect(await stepRows(pool, lh.schema, id)).toEqual([]);
  });

  it('under the worker role, steps and sleeps go through their functions, and the table cannot be written directly', async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const lh = await roleClient(owner.schema, 'worker', { backoff: noBackoff });
    const pool = testPool();
    const ran: string[] = [];
    const { id } = await owner.enqueue('roles', {});
    const worker = lh.worker({
      queues: {
        roles: async (job) => {
          const first = await job.step('first', () => {
            ran.push('first');
            return { n: 1 };
          });
          await job.sleep('pause', 200);
          return [first, await job.step('second', () => ran.push('second'))];
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await owner.getJob(id))?.status === 'succeeded', { what: 'succeeded' });
    expect(ran).toEqual(['first', 'second']);
    expect((await owner.getJob(id))!.result).toEqual([{ n: 1 }, 2]);
    expect((await stepRows(pool, owner.schema, id)).map((r) => r.name)).toEqual([
      'first#0',
      'pause#0',
      'second#0',
    ]);
    // The worker role has no right on the table itself: only the fenced functions write it.
    await expect(
      lh.pool.query(
        `INSERT INTO "${owner.schema}".job_steps (job_id, seq, name, kind, attempt, lease_token)
                 VALUES ($1, 5, 'x#0', 'step', 1, 1)`,
        [id],
      ),
    ).rejects.toThrow(/permission denied/);
  });

  it('sleepUntil a time already past returns at once; bad sleep arguments and step options are ValidationErrors', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const errors: unknown[] = [];
    const { id } = await lh.enqueue('until', {});
    const worker = lh.worker({
      queues: {
        until: async (job) => {
          for (const bad of [
            () => job.sleep('nap', -1),
            () => job.sleep('nap', Number.NaN),
            () => job.sleepUntil('nap', new Date('nonsense')),
            () => job.sleepUntil('nap', new Date(Date.now() + 400 * 86_400_000)),
            () => job.sleep('bad name', 10),
          ]) {
            await bad().catch((err: unknown) => errors.push(err));
          }
          const step = job.step as (name: string, fn: () => number, options: unknown) => Promise<number>;
          await step('retrying', () => 1, { maxAttempts: 3 }).catch((err: unknown) => errors.push(err));
          await job.sleepUntil('deadline', new Date(Date.now() - 60_000));
          return 'woke at once';
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: 'succeeded' });
    expect(errors).toHaveLength(6);
    for (const err of errors) expect(err).toBeInstanceOf(ValidationError);
    const job = await lh.getJob(id, { history: true });
    expect(job).toMatchObject({ attemptCount: 1, result: 'woke at once' });
    expect(job!.history.some((e) => e.kind === 'snoozed')).toBe(false);
    // Only the valid sleep was recorded, first of the job's steps.
    expect((await stepRows(pool, lh.schema, id)).map((r) => [r.seq, r.name, r.kind])).toEqual([
      [0, 'deadline#0', 'sleep'],
    ]);
  });

  it('a job that calls more than 1,000 steps goes dead with TOO_MANY_STEPS, its first 1,000 kept', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    let ran = 0;
    const { id } = await lh.enqueue('many', {}, { maxAttempts: 3 });
    const worker = lh.worker({
      queues: {
        many: async (job) => {
          for (let i = 0; i < 1001; i++) await job.step('tick', () => ++ran);
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(id))?.status === 'dead', { timeoutMs: 60_000, what: 'dead' });
    expect(await lh.getJob(id)).toMatchObject({ lastErrorCode: 'TOO_MANY_STEPS', attemptCount: 1 });
    expect(ran).toBe(1000);
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n, max(seq) AS last, max(name) FILTER (WHERE seq = 999) AS name
       FROM "${lh.schema}".job_steps WHERE job_id = $1`,
      [id],
    );
    expect(rows[0]).toEqual({ n: 1000, last: 999, name: 'tick#999' });
  });

  it('a handler that calls no step sends no step statement; one that does reads its steps once per attempt', async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    // Every statement the worker sends, by name (the statement names carry their label).
    const sent: string[] = [];
    const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
    (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const config = args[0] as { name?: string; text?: string } | string;
      sent.push(typeof config === 'string' ? config : (config.name ?? config.text ?? ''));
      return query(...args);
    };
    const lh = new Leasehold({ pool: pool as pg.Pool, schema: owner.schema, backoff: noBackoff });
    const worker = lh.worker({
      queues: {
        plain: async () => 'done',
        stepped: async (job) => {
          for (const name of ['a', 'b', 'c']) await job.step(name, () => name);
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    const plain = await owner.enqueue('plain', {});
    await waitFor(async () => (await owner.getJob(plain.id))?.status === 'succeeded', { what: 'plain done' });
    const steps = (names: string[]) => names.filter((n) => /_step_(list|record)_/.test(n));
    expect(sent.length).toBeGreaterThan(0);
    expect(steps(sent)).toEqual([]);
    const stepped = await owner.enqueue('stepped', {});
    await waitFor(async () => (await owner.getJob(stepped.id))?.status === 'succeeded', {
      what: 'stepped done',
    });
    const stepStatements = steps(sent).map((n) => (n.includes('_step_list_') ? 'list' : 'record'));
    expect(stepStatements).toEqual(['list', 'record', 'record', 'record']);
    await worker.stop();
    await lh.close();
  });

  it('in a batch handler each item records its own steps, and job.sleep is refused rather than handing back the batch', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const errors: unknown[] = [];
    const { ids } = await lh.enqueueMany('batched-steps', [{ payload: 1 }, { payload: 2 }]);
    const worker = lh.worker({
      queues: {
        'batched-steps': {
          batch: { size: 2 },
          handler: async (jobs: BatchJobContext[]) => {
            await jobs[0]?.sleep('nap', 1000).catch((err: unknown) => errors.push(err));
            return Promise.all(jobs.map((job) => job.step('double', () => (job.payload as number) * 2)));
          },
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    for (const id of ids) {
      await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: `job ${id} done` });
    }
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(ValidationError);
    const results = await Promise.all(ids.map(async (id) => (await lh.getJob(id))!.result));
    const recorded = await Promise.all(ids.map((id) => stepRows(pool, lh.schema, id)));
    // Each job's result is its own step's value, recorded under its own lease.
    expect(recorded.map((rows) => rows.map((r) => [r.name, r.result]))).toEqual(
      results.map((result) => [['double#0', result]]),
    );
    expect(results.sort()).toEqual([2, 4]);
  });
});
