import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  type BatchJobContext,
  defineTask,
  LeaseLostError,
  PermanentError,
  RetryableError,
  ValidationError,
} from '../../src/index.js';
import { countByStatus, migratedClient, testPool, waitFor } from '../support/db.js';
import { expireLeases } from '../support/job-states.js';
import { deferred, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

describe('batch handlers', () => {
  it('a batch handler of size 100 gets batches of at most 100, and their completions go in one statement', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    await lh.enqueueMany(
      'mail',
      Array.from({ length: 250 }, (_, i) => ({ payload: { n: i } })),
    );
    const sizes: number[] = [];
    const seen = new Set<string>();
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        mail: {
          batch: { size: 100 },
          handler: async (jobs: BatchJobContext<{ n: number }>[]) => {
            sizes.push(jobs.length);
            for (const job of jobs) seen.add(job.id);
            return jobs.map((job) => ({ sent: job.payload.n }));
          },
        },
      },
    });
    const completeFlushes: number[] = [];
    worker.on('flushed', (info) => {
      if (info.operation === 'complete') completeFlushes.push(info.jobs);
    });
    await started(worker);
    await waitFor(() => worker.counters.completed === 250, { what: '250 completions' });
    expect(sizes.every((size) => size >= 1 && size <= 100)).toBe(true);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(250);
    expect(Math.max(...sizes)).toBe(100); // every job was pending at start: the first claim filled a batch
    expect(seen.size).toBe(250);
    // A full batch's completions travel together: no flush carried fewer than a batch's worth.
    expect(Math.max(...completeFlushes)).toBeGreaterThanOrEqual(100);
    expect(await countByStatus(pool, lh.schema)).toEqual({ succeeded: 250 });
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".finished_jobs WHERE (result->>'sent')::int IS NOT NULL`,
    );
    expect(rows[0].n).toBe(250);
  });

  it('settles mixed outcomes per item: results by position, fail, retry with a delay, and a result that cannot be kept', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const ids = (
      await lh.enqueueMany('mixed', [
        { payload: { kind: 'ok' } },
        { payload: { kind: 'permanent' } },
        { payload: { kind: 'later' } },
        { payload: { kind: 'huge' } },
        { payload: { kind: 'ok' } },
      ])
    ).ids;
    const alone: string[] = [];
    const gate = deferred();
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      maxResultBytes: 100,
      queues: {
        mixed: {
          batch: { size: 5, waitMs: 5000 },
          handler: async (jobs: BatchJobContext<{ kind: string }>[]) => {
            await gate.promise;
            const results = [];
            for (const job of jobs) {
              if (job.payload.kind === 'permanent') {
                alone.push(await job.fail(new PermanentError('bad address', { code: 'BAD_ADDRESS' })));
              } else if (job.payload.kind === 'later') {
                alone.push(await job.retry(new Error('mailbox full'), { delayMs: 3_600_000 }));
              }
              results.push(job.payload.kind === 'huge' ? 'x'.repeat(500) : { ok: job.id });
            }
            return results;
          },
        },
      },
    });
    await started(worker);
    await waitFor(() => worker.activeCount === 5, { what: 'one batch of five' });
    gate.resolve();
    await waitFor(() => worker.activeCount === 0, { what: 'the batch settled' });
    expect(alone).toEqual(['dead', 'retry']);
    const [ok1, permanent, later, huge, ok2] = await Promise.all(ids.map((id) => lh.getJob(id)));
    expect(ok1).toMatchObject({ status: 'succeeded', result: { ok: ids[0] } });
    expect(ok2).toMatchObject({ status: 'succeeded', result: { ok: ids[4] } });
    expect(permanent).toMatchObject({ status: 'dead', lastErrorCode: 'BAD_ADDRESS' });
    expect(later).toMatchObject({ status: 'pending', attemptCount: 1, lastErrorMessage: 'mailbox full' });
    expect(later!.availableAt.getTime() - Date.now()).toBeGreaterThan(3_000_000);
    expect(huge).toMatchObject({ status: 'dead', lastErrorCode: 'RESULT_TOO_LARGE' });
    expect(worker.counters).toMatchObject({ completed: 2, dead: 2, retried: 1, lost: 0 });
  });

  it('a thrown error fails every unsettled job by its retry rules; an item settled before stays as it was', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 3_600_000, maxMs: 3_600_000 } });
    const ids = (
      await lh.enqueueMany('throws', [{ payload: { i: 0 } }, { payload: { i: 1 } }, { payload: { i: 2 } }])
    ).ids;
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        throws: {
          batch: { size: 3, waitMs: 5000 },
          handler: async (jobs: BatchJobContext[]) => {
            await jobs[0]!.fail(new PermanentError('first one is bad'));
            throw new RetryableError('upstream down', { code: 'UPSTREAM' });
          },
        },
      },
    });
    await started(worker);
    await waitFor(() => worker.counters.retried === 2 && worker.counters.dead === 1, {
      what: 'the outcomes',
    });
    const jobs = await Promise.all(ids.map((id) => lh.getJob(id)));
    expect(jobs.map((job) => job?.status)).toEqual(['dead', 'pending', 'pending']);
    expect(jobs.map((job) => job?.lastErrorCode)).toEqual(['PERMANENT', 'UPSTREAM', 'UPSTREAM']);
  });

  it('a batch resolving to an array of the wrong length fails its jobs as BATCH_RESULT', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const ids = (await lh.enqueueMany('wrong', [{ payload: 1 }, { payload: 2 }])).ids;
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        wrong: { batch: { size: 2, waitMs: 5000 }, handler: async (_jobs: BatchJobContext[]) => [1] },
      },
    });
    await started(worker);
    await waitFor(() => worker.counters.dead === 2, { what: 'both dead' });
    for (const id of ids) expect(await lh.getJob(id)).toMatchObject({ lastErrorCode: 'BATCH_RESULT' });
  });

  it('waitMs bounds how long a partial batch waits: one job alone runs once the wait is over', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const sizes: number[] = [];
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      pollIntervalMs: 50,
      queues: {
        partial: {
          batch: { size: 50, waitMs: 4000 }, // long enough for a loaded machine to claim the second job
          handler: async (jobs: BatchJobContext[]) => {
            sizes.push(jobs.length);
          },
        },
      },
    });
    await started(worker);
    await lh.enqueue('partial', { first: true });
    await waitFor(() => worker.activeCount === 1, { what: 'the first job waiting in its batch' });
    // Enqueued while the first waits: it joins the same batch.
    await lh.enqueue('partial', { second: true });
    // Two of fifty: the batch ran because its wait was over, not because it filled.
    await waitFor(() => worker.counters.completed === 2, { what: 'both completed' });
    expect(sizes).toEqual([2]);
  });

  it('a stale batch completion changes nothing and is counted per job', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const ids = (await lh.enqueueMany('stale', [{ payload: 1 }, { payload: 2 }, { payload: 3 }])).ids;
    const running = deferred();
    const gate = deferred();
    const worker = lh.worker({
      owner: 'old',
      recoveryIntervalMs: 0,
      queues: {
        stale: {
          leaseMs: 60_000, // no renewal comes before the test lets the handler return
          batch: { size: 3, waitMs: 5000 },
          handler: async (_jobs: BatchJobContext[]) => {
            running.resolve();
            await gate.promise;
          },
        },
      },
    });
    const losses: string[] = [];
    worker.on('leaseLost', (_job, loss) => losses.push(loss.reason));
    await started(worker);
    await running.promise;
    // The leases lapse in database time, the sweep takes them back, and another owner claims them.
    await expireLeases(pool, lh.schema, { queue: 'stale' });
    await lh.recoverExpired();
    const taken = await lh.claim({ queue: 'stale', owner: 'new', limit: 3 });
    expect(taken).toHaveLength(3);
    gate.resolve();
    await waitFor(() => worker.counters.lost === 3, { what: 'three refused completions' });
    expect(worker.counters.completed).toBe(0);
    // Refused while this process thought them held: one read tells a lost lease from a cancel first.
    await waitFor(() => losses.length === 3, { what: 'three lost leases reported' });
    expect(losses).toEqual(['refused', 'refused', 'refused']);
    expect(worker.counters.cancelled).toBe(0);
    for (const id of ids) {
      const job = await lh.getJob(id, { history: true });
      expect(job).toMatchObject({ status: 'running', leaseOwner: 'new', attemptCount: 2 });
      expect(job!.history.filter((e) => e.kind === 'refused').map((e) => [e.owner, e.operation])).toEqual([
        ['old', 'complete'],
      ]);
    }
    expect((await lh.leaseRefusals()).map((r) => [r.queue, r.operation, r.count])).toEqual([
      ['stale', 'complete', 3],
    ]);
  });

  it('renews every job of a running batch: none lapses while the handler outlives its lease', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    await lh.enqueueMany('long', [{ payload: 1 }, { payload: 2 }]);
    const renewed = deferred();
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        long: {
          leaseMs: 600,
          batch: { size: 2, waitMs: 5000 },
          handler: async (_jobs: BatchJobContext[]) => {
            await renewed.promise;
          },
        },
      },
    });
    await started(worker);
    await waitFor(
      async () => {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE lease_extensions >= 2 AND status = 'running'`,
        );
        return rows[0].n === 2;
      },
      { what: 'both leases extended twice' },
    );
    renewed.resolve();
    await waitFor(() => worker.counters.completed === 2, { what: 'both completed' });
    expect(worker.counters.lost).toBe(0);
  });

  it('a job settled alone is no longer renewed while its batch runs on: no refused renewal, no lost lease', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 3_600_000, maxMs: 3_600_000 } });
    const pool = testPool();
    const { ids } = await lh.enqueueMany('alone', [{ payload: 0 }, { payload: 1 }]);
    const losses: unknown[] = [];
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        alone: {
          leaseMs: 600,
          batch: { size: 2, waitMs: 5000 },
          handler: async (jobs: BatchJobContext[]) => {
            await jobs[0]!.retry(new Error('later'));
            // Runs on for several renewals of the other job.
            await waitFor(
              async () => {
                const { rows } = await pool.query(
                  `SELECT lease_extensions FROM "${lh.schema}".jobs WHERE id = $1`,
                  [ids[1]],
                );
                return rows[0].lease_extensions >= 3;
              },
              { what: 'the other job renewed three times' },
            );
          },
        },
      },
    });
    worker.on('leaseLost', (_job, loss) => losses.push(loss));
    await started(worker);
    await waitFor(() => worker.activeCount === 0 && worker.counters.completed === 1, {
      what: 'the batch ended',
    });
    expect(worker.counters).toMatchObject({ retried: 1, completed: 1, lost: 0 });
    expect(losses).toEqual([]);
    expect(await lh.leaseRefusals()).toEqual([]);
  });

  it('a task takes batch too: the payloads are checked against its schema, and a mismatch fails alone', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const schema = z.object({ to: z.string() });
    const got: string[][] = [];
    const email = defineTask('email', {
      schema,
      batch: { size: 10, waitMs: 200 },
      handler: async (jobs) => {
        got.push(jobs.map((job) => job.payload.to));
        return jobs.map((job) => job.payload.to.length);
      },
    });
    await lh.enqueue(email, { to: 'a@x' });
    await lh.enqueue(email, { to: 'bb@x' });
    const { id: bad } = await lh.enqueue('email', { to: 42 });
    const worker = lh.worker({ recoveryIntervalMs: 0, tasks: [email] });
    await started(worker);
    await waitFor(() => worker.counters.completed === 2 && worker.counters.dead === 1, { what: 'outcomes' });
    expect(got).toEqual([['a@x', 'bb@x']]);
    expect(await lh.getJob(bad)).toMatchObject({ status: 'dead', lastErrorCode: 'PAYLOAD_SCHEMA' });
  });

  it("job.transaction in a batch: the handler's writes and every job's completion commit together, with results", async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    await pool.query(`CREATE TABLE "${lh.schema}".sent (job_id bigint PRIMARY KEY, address text NOT NULL)`);
    const { ids } = await lh.enqueueMany('tx', [{ payload: 'a@x' }, { payload: 'b@x' }, { payload: 'c@x' }]);
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        tx: {
          batch: { size: 3, waitMs: 5000 },
          handler: async (jobs: BatchJobContext<string>[]) => {
            await jobs[0]!.transaction(async (client) => {
              for (const job of jobs) {
                await client.query(`INSERT INTO "${lh.schema}".sent VALUES ($1, $2)`, [job.id, job.payload]);
              }
              return jobs.map((job) => ({ to: job.payload }));
            });
          },
        },
      },
    });
    const flushed: string[] = [];
    worker.on('flushed', (info) => flushed.push(info.operation));
    await started(worker);
    await waitFor(() => worker.counters.completed === 3, { what: 'three completions' });
    const jobs = await Promise.all(ids.map((id) => lh.getJob(id)));
    expect(jobs.map((job) => [job?.status, job?.result])).toEqual([
      ['succeeded', { to: 'a@x' }],
      ['succeeded', { to: 'b@x' }],
      ['succeeded', { to: 'c@x' }],
    ]);
    expect((await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".sent`)).rows[0].n).toBe(3);
    expect(flushed).not.toContain('complete'); // the transaction completed them, not the batcher
  });

  it("job.transaction in a batch: one refused completion rolls back everyone's, and the others stay held", async () => {
    const lh = await migratedClient({ backoff: { baseMs: 3_600_000, maxMs: 3_600_000 } });
    const pool = testPool();
    await pool.query(`CREATE TABLE "${lh.schema}".sent (job_id bigint PRIMARY KEY)`);
    const { ids } = await lh.enqueueMany('txlost', [{ payload: 0 }, { payload: 1 }, { payload: 2 }]);
    const running = deferred();
    const gate = deferred();
    let thrown: unknown;
    const worker = lh.worker({
      recoveryIntervalMs: 0,
      queues: {
        txlost: {
          leaseMs: 60_000,
          batch: { size: 3, waitMs: 5000 },
          handler: async (jobs: BatchJobContext[]) => {
            running.resolve();
            await gate.promise;
            try {
              await jobs[0]!.transaction(async (client) => {
                for (const job of jobs)
                  await client.query(`INSERT INTO "${lh.schema}".sent VALUES ($1)`, [job.id]);
              });
            } catch (err) {
              thrown = err;
              throw err;
            }
          },
        },
      },
    });
    worker.on('leaseLost', () => {});
    await started(worker);
    await running.promise;
    // Another claim takes the middle job over: its fence moves on.
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET lease_token = lease_token + 1, lease_owner = 'someone-else' WHERE id = $1`,
      [ids[1]],
    );
    gate.resolve();
    await waitFor(() => worker.activeCount === 0, { what: 'the batch ended' });
    expect(thrown).toBeInstanceOf(LeaseLostError);
    expect((await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".sent`)).rows[0].n).toBe(0);
    const jobs = await Promise.all(ids.map((id) => lh.getJob(id)));
    // The refused one is the other owner's; the two still held failed by the rethrown error's rules.
    expect(jobs.map((job) => [job?.status, job?.leaseOwner])).toEqual([
      ['pending', null],
      ['running', 'someone-else'],
      ['pending', null],
    ]);
    expect(worker.counters).toMatchObject({ completed: 0, retried: 2, lost: 1 });
    expect((await lh.leaseRefusals()).map((r) => [r.operation, r.count])).toEqual([['complete', 1]]);
  });

  it('refuses a bad batch option with a ValidationError naming it, before anything runs', async () => {
    const lh = await migratedClient();
    const handler = async (_jobs: BatchJobContext[]) => {};
    const bad = [
      [{ size: 0 }, 'queues.q.batch.size'],
      [{ size: 1001 }, 'queues.q.batch.size'],
      [{ size: 1.5 }, 'queues.q.batch.size'],
      [{ size: 10, waitMs: -1 }, 'queues.q.batch.waitMs'],
      [{ size: 10, waitMs: 60_001 }, 'queues.q.batch.waitMs'],
      [{ size: 10, wait: 5 }, 'queues.q.batch.wait'],
      ['10', 'queues.q.batch'],
    ] as const;
    for (const [batch, field] of bad) {
      const err = (() => {
        try {
          lh.worker({ queues: { q: { handler, batch: batch as never } } });
        } catch (e) {
          return e;
        }
      })();
      expect(err, JSON.stringify(batch)).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).field).toBe(field);
    }
    // defineTask refuses a bad batch at once, naming it.
    expect(() => defineTask('t', { batch: { size: 0 }, handler })).toThrow(/options\.batch\.size/);
    // concurrency counts jobs: fewer than a batch's size could never fill one.
    expect(() => lh.worker({ queues: { q: { handler, batch: { size: 10 }, concurrency: 5 } } })).toThrow(
      ValidationError,
    );
  });
});
