import { describe, expect, it } from 'vitest';
import {
  type BatchJobContext,
  defineTask,
  INVOKE_ERROR_CODES,
  InvokedJobCancelledError,
  InvokedJobDeadError,
  isLeaseholdError,
  type JobContext,
  type Lease,
  PermanentError,
  ValidationError,
} from '../../src/index.js';
import { beginInvoke } from '../../src/storage/flows/invoke.js';
import { wakeupChannel } from '../../src/storage/jobs/enqueue.js';
import { claimJobs } from '../../src/storage/leases/claim.js';
import { completeJobs } from '../../src/storage/leases/complete.js';
import { runCliInProcess } from '../support/cli-inprocess.js';
import { databaseUrl, expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { roleClient } from '../support/roles.js';
import { forkWorker, killHard, started } from '../support/worker.js';

// job.invoke (issue 30): a child job enqueued as a recorded step, the invoking job handed back until
// the child ends, woken by flows' release from the child's accepted completion, death or cancel.

const noBackoff = { baseMs: 0, maxMs: 0 };
type Pool = ReturnType<typeof testPool>;

// The invoking job's row: suspended means pending, no lease, no attempt spent, held by its child.
async function parentRow(pool: Pool, schema: string, id: string) {
  const { rows } = await pool.query(
    `SELECT status::text, attempt_count, lease_owner, lease_expires_at, waiting_parents
     FROM "${schema}".jobs WHERE id = $1`,
    [id],
  );
  return rows[0];
}

// The jobs ever enqueued on `queue` (live or succeeded), with how many times each was claimed.
async function jobsOn(pool: Pool, schema: string, queue: string) {
  const { rows } = await pool.query<{ id: string; attempts: number }>(
    `SELECT id::text, attempt_count AS attempts FROM "${schema}".jobs WHERE queue_name = $1
     UNION ALL
     SELECT id::text, attempt_count FROM "${schema}".finished_jobs WHERE queue_name = $1 ORDER BY 1`,
    [queue],
  );
  return rows;
}

async function succeeded(lh: Awaited<ReturnType<typeof migratedClient>>, id: string) {
  await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', {
    timeoutMs: 20_000,
    what: `job ${id} succeeded`,
  });
  return lh.getJob(id);
}

describe('job.invoke', () => {
  it("resumes with the child's result, enqueued once, the invoking job's attempt given back", async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const add = defineTask<{ a: number; b: number }, number>('invoke-add', {
      handler: async (job) => job.payload.a + job.payload.b,
    });
    let runs = 0;
    const sum = defineTask<{ a: number; b: number }>('invoke-sum', {
      handler: async (job) => {
        runs++;
        const total = await job.invoke(add, job.payload);
        return { total };
      },
    });
    const { id } = await lh.enqueue(sum, { a: 2, b: 3 });
    const worker = await started(lh.worker({ tasks: [sum, add], pollIntervalMs: 50 }));
    const job = await succeeded(lh, id);
    await worker.stop();
    expect(job?.result).toEqual({ total: 5 });
    // Run twice (before and after the child), one attempt in all: the hand-back spent none.
    expect(runs).toBe(2);
    expect(job?.attemptCount).toBe(1);
    const children = await jobsOn(pool, lh.schema, 'invoke-add');
    expect(children).toHaveLength(1);
    const { rows: steps } = await pool.query(
      `SELECT name, kind, result FROM "${lh.schema}".job_steps WHERE job_id = $1`,
      [id],
    );
    expect(steps).toEqual([
      { name: 'invoke-add#0', kind: 'invoke', result: { childId: children[0]?.id, queue: 'invoke-add' } },
    ]);
    // `leasehold jobs show` names the invoke and its child (never a payload or result).
    const shown = await runCliInProcess([
      'jobs',
      'show',
      id,
      '--database-url',
      databaseUrl(),
      '--schema',
      lh.schema,
    ]);
    expect(shown.stdout).toContain(`invoke invoke-add#0: job ${children[0]?.id}`);
  });

  it("a dead child wakes its invoking job with the child's error; left uncaught, it ends the invoker dead", async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const seen: unknown[] = [];
    const worker = await started(
      lh.worker({
        queues: {
          'invoke-fails': async () => {
            throw new PermanentError('card declined', { code: 'DECLINED' });
          },
          'invoke-catches': async (job: JobContext) => {
            try {
              return await job.invoke('invoke-fails', {});
            } catch (err) {
              // A SnoozeError (the hand-back while the child runs) goes through untouched.
              if (!(err instanceof InvokedJobDeadError)) throw err;
              seen.push(err);
              return { child: err.jobId, code: err.code, childCode: err.lastError.code };
            }
          },
          'invoke-lets-go': async (job: JobContext) => job.invoke('invoke-fails', {}),
        },
        pollIntervalMs: 50,
      }),
    );
    const caught = await lh.enqueue('invoke-catches', {});
    const uncaught = await lh.enqueue('invoke-lets-go', {}, { maxAttempts: 5 });
    const job = await succeeded(lh, caught.id);
    expect(job?.result).toEqual({ child: expect.any(String), code: 'JOB_DEAD', childCode: 'DECLINED' });
    expect(isLeaseholdError(seen[0], 'JOB_DEAD')).toBe(true);
    await waitFor(async () => (await lh.getJob(uncaught.id))?.status === 'dead', {
      what: 'the invoker died',
    });
    await worker.stop();
    // Dead at its first attempt: the child's end is recorded, so a retry could only read it again.
    expect(await lh.getJob(uncaught.id)).toMatchObject({ attemptCount: 1, lastErrorCode: 'JOB_DEAD' });
  });

  it('holds no lease while it waits; a cancelled child wakes it with JOB_CANCELLED', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const worker = await started(
      lh.worker({
        queues: {
          'invoke-waits': async (job: JobContext) => {
            try {
              return await job.invoke('invoke-unserved', { n: 1 }, { name: 'later', priority: 5 });
            } catch (err) {
              if (!(err instanceof InvokedJobCancelledError)) throw err;
              return { cancelled: err.jobId, reason: err.lastError.message };
            }
          },
        },
        pollIntervalMs: 50,
      }),
    );
    const { id } = await lh.enqueue('invoke-waits', {});
    await waitFor(async () => (await jobsOn(pool, lh.schema, 'invoke-unserved')).length === 1, {
      what: 'the child enqueued',
    });
    await waitFor(async () => (await parentRow(pool, lh.schema, id))?.status === 'pending', {
      what: 'the invoker handed back',
    });
    // Suspended: pending, no lease, its attempt given back, held out of the claimable set by its child.
    expect(await parentRow(pool, lh.schema, id)).toEqual({
      status: 'pending',
      attempt_count: 0,
      lease_owner: null,
      lease_expires_at: null,
      waiting_parents: 1,
    });
    const [child] = await jobsOn(pool, lh.schema, 'invoke-unserved');
    expect(await lh.getJob(child!.id)).toMatchObject({ status: 'pending', priority: 5 });
    await lh.cancel(child!.id, { reason: 'not needed' });
    const job = await succeeded(lh, id);
    await worker.stop();
    expect(job?.result).toEqual({ cancelled: child!.id, reason: 'not needed' });
    expect(job?.attemptCount).toBe(1);
  });

  it('an invoker SIGKILLed between its invoke and the child’s end resumes without enqueuing a second child', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const { id } = await lh.enqueue('invoke-victim', {});
    const victim = await forkWorker({
      schema: lh.schema,
      queue: 'invoke-victim',
      mode: 'invoke-then-hang',
      invokeQueue: 'invoke-kid',
      leaseMs: 1000,
      owner: 'victim',
    });
    await waitFor(() => victim.messages.some((m) => m.type === 'invoked' && m.id === id), {
      what: 'the child process invoked',
    });
    await killHard(victim.child);
    let kidRuns = 0;
    const survivor = await started(
      lh.worker({
        owner: 'survivor',
        queues: {
          'invoke-kid': async (job: JobContext) => {
            kidRuns++;
            return { kid: job.id, from: (job.payload as { from: string }).from };
          },
          'invoke-victim': async (job: JobContext) => ({
            got: await job.invoke('invoke-kid', { from: job.id }),
          }),
        },
        recoveryIntervalMs: 100,
        pollIntervalMs: 50,
      }),
    );
    const job = await succeeded(lh, id);
    await survivor.stop();
    const kids = await jobsOn(pool, lh.schema, 'invoke-kid');
    expect(kids).toHaveLength(1);
    expect(kidRuns).toBe(1);
    // The survivor got the one child's result: the child the killed process enqueued.
    expect(job?.result).toEqual({ got: { kid: kids[0]?.id, from: id } });
    // The killed claim's attempt was spent by its expiry; the resume after the child spent none more.
    expect(job?.attemptCount).toBe(2);
  });

  it("a stale child completion (refused by the fence) wakes nobody; the child's accepted one does", async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const invoker = await started(
      lh.worker({
        queues: { 'invoke-parent': async (job: JobContext) => job.invoke('invoke-manual', {}) },
        pollIntervalMs: 50,
      }),
    );
    const { id } = await lh.enqueue('invoke-parent', {});
    await waitFor(async () => (await parentRow(pool, lh.schema, id))?.waiting_parents === 1, {
      what: 'the invoker waiting',
    });
    // The invoked job's claim asks for the full completion (it has a waiter to release), not the plain one.
    const [row] = await claimJobs(pool, lh.schema, {
      queue: 'invoke-manual',
      owner: 'manual',
      limit: 1,
      leaseMs: 60_000,
    });
    expect(row?.plain).toBe(false);
    const lease = {
      jobId: row!.id,
      token: row!.lease_token,
      claimId: row!.lease_claim_id,
      owner: 'manual',
      queue: 'invoke-manual',
    };
    await expireLease(pool, lh.schema, row!.id);
    expect(await completeJobs(pool, lh.schema, [{ ...lease, result: '"stale"', plain: false }])).toEqual(
      new Set(),
    );
    // Refused, and nothing released: the invoker still waits on an unresolved edge.
    expect(await parentRow(pool, lh.schema, id)).toMatchObject({ status: 'pending', waiting_parents: 1 });
    const { rows: edges } = await pool.query(
      `SELECT resolved FROM "${lh.schema}".job_dependencies WHERE child_id = $1`,
      [id],
    );
    expect(edges).toEqual([{ resolved: false }]);
    // The next claim's accepted completion wakes it, with that claim's result.
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`,
      [row!.id],
    );
    const [again] = await claimJobs(pool, lh.schema, {
      queue: 'invoke-manual',
      owner: 'manual',
      limit: 1,
      leaseMs: 60_000,
    });
    const accepted = await completeJobs(pool, lh.schema, [
      {
        jobId: again!.id,
        token: again!.lease_token,
        claimId: again!.lease_claim_id,
        owner: 'manual',
        queue: 'invoke-manual',
        result: '"accepted"',
        plain: again!.plain,
      },
    ]);
    expect(accepted).toEqual(new Set([row!.id]));
    const job = await succeeded(lh, id);
    await invoker.stop();
    expect(job?.result).toBe('accepted');
  });

  it('bad targets, payloads and options are ValidationErrors, and write nothing', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const typed = defineTask('invoke-typed', {
      handler: async () => 1,
      schema: {
        '~standard': {
          version: 1 as const,
          vendor: 'test',
          validate: (value: unknown) =>
            typeof (value as { n?: unknown })?.n === 'number'
              ? { value: value as { n: number } }
              : { issues: [{ message: 'n must be a number' }] },
          types: undefined as unknown as { input: { n: number }; output: { n: number } },
        },
      },
    });
    const errors: unknown[] = [];
    const attempts: [unknown, unknown, unknown][] = [
      ['bad queue!', {}, undefined],
      [42, {}, undefined],
      [typed, { n: 'x' }, undefined],
      ['invoke-ok', { big: 'x'.repeat(300 * 1024) }, undefined],
      ['invoke-ok', {}, { bogus: 1 }],
      ['invoke-ok', {}, { maxAttempts: 0 }],
      ['x'.repeat(101), {}, undefined],
    ];
    const worker = await started(
      lh.worker({
        queues: {
          'invoke-bad': async (job: JobContext) => {
            for (const [target, payload, options] of attempts) {
              // biome-ignore lint/suspicious/noExplicitAny: hostile input on purpose
              await (job.invoke as any)(target, payload, options).catch((err: unknown) => errors.push(err));
            }
            return 'done';
          },
        },
        pollIntervalMs: 50,
      }),
    );
    const { id } = await lh.enqueue('invoke-bad', {});
    await succeeded(lh, id);
    await worker.stop();
    expect(errors).toHaveLength(attempts.length);
    for (const err of errors) expect(err).toBeInstanceOf(ValidationError);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".job_steps`);
    expect(rows[0]).toEqual({ n: 0 });
    expect(await jobsOn(pool, lh.schema, 'invoke-ok')).toEqual([]);
    expect(INVOKE_ERROR_CODES.removed).toBe('INVOKED_JOB_REMOVED');
  });

  it('a child that ends while its invoker still runs (before the hand-back) releases it all the same', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const { id } = await lh.enqueue('invoke-race', {});
    const [parent] = (await lh.claim({ queue: 'invoke-race', owner: 'p' })) as Lease[];
    const invoke = (seq: number) =>
      beginInvoke(pool, lh.schema, parent!, {
        seq,
        key: `invoke-race-kid#${seq}`,
        queue: 'invoke-race-kid',
        payloadJson: '{}',
        priority: 0,
        maxAttempts: 1,
        wakeupChannel: wakeupChannel(lh.schema),
      });
    expect(await invoke(0)).toMatchObject({ held: true, recorded: true });
    expect(await parentRow(pool, lh.schema, id)).toMatchObject({ status: 'running', waiting_parents: 1 });
    // The child succeeds while the invoker still holds its lease: released, though running.
    const [kid] = (await lh.claim({ queue: 'invoke-race-kid', owner: 'k' })) as Lease[];
    expect(await lh.complete(kid!)).toBe(true);
    expect(await parentRow(pool, lh.schema, id)).toMatchObject({ status: 'running', waiting_parents: 0 });
    // And a second child that dies (its one attempt spent), as the policy 'run' releases it.
    expect(await invoke(1)).toMatchObject({ held: true, recorded: true });
    const [doomed] = (await lh.claim({ queue: 'invoke-race-kid', owner: 'k' })) as Lease[];
    expect(await lh.fail(doomed!, new Error('boom'))).toBe('dead');
    expect(await parentRow(pool, lh.schema, id)).toMatchObject({ status: 'running', waiting_parents: 0 });
    // Its hand-back now leaves it claimable at once.
    expect(await lh.snooze(parent!, 0)).toBe(true);
    const [resumed] = (await lh.claim({ queue: 'invoke-race', owner: 'p' })) as Lease[];
    expect(resumed?.jobId).toBe(id);
  });

  it('in a batch handler job.invoke is refused (it would hand back the whole batch), nothing enqueued', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const errors: unknown[] = [];
    const { ids } = await lh.enqueueMany('invoke-batched', [{ payload: 1 }, { payload: 2 }]);
    const worker = await started(
      lh.worker({
        queues: {
          'invoke-batched': {
            batch: { size: 2 },
            handler: async (jobs: BatchJobContext[]) => {
              await jobs[0]?.invoke('invoke-from-batch', {}).catch((err: unknown) => errors.push(err));
            },
          },
        },
        pollIntervalMs: 20,
      }),
    );
    for (const id of ids) await succeeded(lh, id);
    await worker.stop();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(ValidationError);
    expect(await jobsOn(pool, lh.schema, 'invoke-from-batch')).toEqual([]);
  });

  it('under the worker role, an invoke goes through its functions (child enqueued, invoker woken)', async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const lh = await roleClient(owner.schema, 'worker', { backoff: noBackoff });
    const pool = testPool();
    const { id } = await owner.enqueue('invoke-role-parent', {});
    const worker = await started(
      lh.worker({
        queues: {
          'invoke-role-kid': async (job: JobContext) => ({ doubled: (job.payload as { n: number }).n * 2 }),
          'invoke-role-parent': async (job: JobContext) => job.invoke('invoke-role-kid', { n: 21 }),
        },
        pollIntervalMs: 20,
      }),
    );
    const job = await succeeded(owner, id);
    await worker.stop();
    expect(job?.result).toEqual({ doubled: 42 });
    expect(await jobsOn(pool, owner.schema, 'invoke-role-kid')).toHaveLength(1);
    // The worker role cannot link jobs itself: only the fenced invoke function writes an edge.
    await expect(
      lh.pool.query(`INSERT INTO "${owner.schema}".job_dependencies (parent_id, child_id) VALUES (1, $1)`, [
        id,
      ]),
    ).rejects.toThrow(/permission denied/);
  });
});
