import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { contextOf } from '../../src/client.js';
import { JobWaiters } from '../../src/context/job-waiters.js';
import {
  defineTask,
  isLeaseholdError,
  JobCancelledError,
  JobDeadError,
  JobNotFoundError,
  Leasehold,
  PermanentError,
  ValidationError,
  WaitAbortedError,
  WaitTimeoutError,
} from '../../src/index.js';
import { bulkAction } from '../../src/operations/operator/bulk.js';
import { finishedChannel } from '../../src/storage/finish-notices.js';
import {
  databaseUrl,
  directDatabaseUrl,
  listenOptions,
  migratedClient,
  testPool,
  waitFor,
} from '../support/db.js';
import { rejection } from '../support/hostile.js';
import { roleClient } from '../support/roles.js';
import { deferred, started } from '../support/worker.js';

// A client of its own on the server itself, LISTENing on a schema's finished channel.
async function listenFinished(schema: string): Promise<{ ids: string[]; end: () => Promise<void> }> {
  const client = new pg.Client({ connectionString: directDatabaseUrl() });
  await client.connect();
  const ids: string[] = [];
  client.on('notification', (message) => ids.push(...(message.payload ?? '').split(',')));
  await client.query(`LISTEN "${finishedChannel(schema)}"`);
  return { ids, end: () => client.end() };
}

// Waiters of their own whose poll would come in an hour: only a notification can settle them soon.
async function hourPollWaiters(): Promise<{ lh: Leasehold; waiters: JobWaiters }> {
  const lh = await migratedClient(listenOptions());
  const waiters = new JobWaiters(
    { pool: lh.pool, schema: lh.schema, listen: true, listenVia: contextOf(lh).listenVia },
    3_600_000,
  );
  return { lh, waiters };
}

describe('lh.waitFor', () => {
  it('resolves with the result once the job succeeded, woken by the notification of its completion', async () => {
    const lh = await migratedClient(listenOptions());
    const heard = await listenFinished(lh.schema);
    try {
      // The waited job's handler finishes only once the wait has marked it: a completion before
      // the mark rightly notifies nothing (waitFor then reads the ended job), which a loaded
      // machine did once, and the notification this test listens for never came.
      const marked = deferred();
      await started(
        lh.worker({
          queues: {
            work: async (job) => {
              if ((job.payload as { n: number }).n === 1) await marked.promise;
              return { echo: job.payload };
            },
          },
        }),
      );
      // A job nobody waits for: its completion notifies nothing.
      const { id: unwatched } = await lh.enqueue('work', { n: 0 });
      await waitFor(async () => (await lh.getJob(unwatched))?.status === 'succeeded');
      const { id } = await lh.enqueue('work', { n: 1 });
      const waiting = lh.waitFor(id);
      await waitFor(
        async () =>
          (await testPool().query(`SELECT notify_on_finish FROM "${lh.schema}".jobs WHERE id = $1`, [id]))
            .rows[0]?.notify_on_finish === true,
        { what: 'the wait to mark the job' },
      );
      marked.resolve();
      expect(await waiting).toEqual({ id, status: 'succeeded', result: { echo: { n: 1 } } });
      // Notifications arrive in commit order: had the first completion notified, it would be here.
      await waitFor(() => heard.ids.includes(id), { what: "the waited job's notification" });
      expect(heard.ids).not.toContain(unwatched);
      // A job that had already succeeded resolves at once, however its id is spelt.
      expect((await lh.waitFor(id)).result).toEqual({ echo: { n: 1 } });
      expect((await lh.waitFor(`00${id}`)).id).toBe(id);
      expect((await lh.waitFor(BigInt(id))).result).toEqual({ echo: { n: 1 } });
    } finally {
      await heard.end();
    }
  });

  it('wakes on the notification alone: waiters whose poll would come in an hour still settle at once', async () => {
    const { lh, waiters } = await hourPollWaiters();
    try {
      const { id } = await lh.enqueue('notified', {});
      const ended = new Promise<unknown>((resolve, reject) => waiters.wait(id, resolve, reject));
      await waitFor(() => waiters.listenerPid, { what: 'the LISTEN connection' });
      await started(lh.worker({ queues: { notified: async () => 'by notification' } }));
      expect(await ended).toMatchObject({ id, status: 'succeeded', result: 'by notification' });
    } finally {
      await waiters.close();
    }
  });

  it('a cancel by filter (bulk) wakes the waiters of the jobs it cancels, with no poll to fall back on', async () => {
    const { lh, waiters } = await hourPollWaiters();
    try {
      const { ids } = await lh.enqueueMany('bulk-cancelled', [{ payload: 1 }, { payload: 2 }]);
      const ended = ids.map(
        (id) => new Promise<unknown>((resolve, reject) => waiters.wait(id, resolve, reject)),
      );
      await waitFor(() => waiters.listenerPid, { what: 'the LISTEN connection' });
      await waitFor(
        async () =>
          (
            await testPool().query(
              `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE id = ANY($1::bigint[]) AND notify_on_finish`,
              [ids],
            )
          ).rows[0]?.n === 2,
        { what: 'both waits to mark their jobs' },
      );
      const result = await bulkAction(
        lh.pool,
        lh.schema,
        'cancel',
        { queue: 'bulk-cancelled' },
        { reason: 'tidy' },
      );
      expect(result.done).toBe(2);
      // Bounded, so that a missing notification fails here rather than at the test's timeout.
      const noNotice = new Promise((resolve) => {
        setTimeout(resolve, 10_000, 'no notice in 10 s').unref();
      });
      expect(await Promise.race([Promise.all(ended), noNotice])).toEqual(
        ids.map((id) => expect.objectContaining({ id, status: 'cancelled', errorCode: 'CANCELLED' })),
      );
    } finally {
      await waiters.close();
    }
  });

  it('rejects with JobDeadError carrying the last error summary, never the payload', async () => {
    const lh = await migratedClient(listenOptions());
    const { id } = await lh.enqueue('doomed', { card: '4111-1111' });
    const waiting = rejection(lh.waitFor(id, { timeoutMs: 20_000 }));
    await started(
      lh.worker({
        queues: {
          doomed: async () => {
            throw new PermanentError('the card was refused', { code: 'CARD_REFUSED' });
          },
        },
      }),
    );
    const err = await waiting;
    expect(err).toBeInstanceOf(JobDeadError);
    expect(isLeaseholdError(err, 'JOB_DEAD')).toBe(true);
    expect((err as JobDeadError).jobId).toBe(id);
    expect((err as JobDeadError).lastError).toEqual({
      code: 'CARD_REFUSED',
      class: 'PermanentError',
      message: 'the card was refused',
    });
    expect(JSON.stringify({ ...(err as object), message: (err as Error).message })).not.toContain('4111');
  });

  it('rejects with JobCancelledError when an operator cancels the job', async () => {
    const lh = await migratedClient(listenOptions());
    const { id } = await lh.enqueue('cancel-me', {});
    const waiting = rejection(lh.waitFor(id, { timeoutMs: 20_000 }));
    // The wait has flagged the job before it is cancelled, so the cancel's notification wakes it.
    await waitFor(async () => {
      const { rows } = await testPool().query(
        `SELECT notify_on_finish FROM "${lh.schema}".jobs WHERE id = $1`,
        [id],
      );
      return rows[0]?.notify_on_finish === true || !contextOf(lh).waiters.listening;
    });
    await lh.cancel(id, { actor: 'ops', reason: 'duplicate order' });
    const err = await waiting;
    expect(err).toBeInstanceOf(JobCancelledError);
    expect(isLeaseholdError(err, 'JOB_CANCELLED')).toBe(true);
    expect((err as JobCancelledError).lastError).toMatchObject({
      code: 'CANCELLED',
      message: 'duplicate order',
    });
  });

  it('rejects with WaitTimeoutError after timeoutMs, leaving the job as it is', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('nobody-serves', {});
    const err = await rejection(lh.waitFor(id, { timeoutMs: 50 }));
    expect(err).toBeInstanceOf(WaitTimeoutError);
    expect(isLeaseholdError(err, 'WAIT_TIMEOUT')).toBe(true);
    expect((await lh.getJob(id))?.status).toBe('pending');
  });

  it('rejects with WaitAbortedError (an AbortError, cause: the reason) when its signal aborts', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('nobody-serves', {});
    const controller = new AbortController();
    const waiting = rejection(lh.waitFor(id, { signal: controller.signal }));
    controller.abort(new Error('the request was cancelled'));
    const err = await waiting;
    expect(err).toBeInstanceOf(WaitAbortedError);
    expect((err as Error).name).toBe('AbortError');
    expect(isLeaseholdError(err, 'WAIT_ABORTED')).toBe(true);
    expect(((err as Error).cause as Error).message).toBe('the request was cancelled');
    // Already aborted: refused at once.
    const again = await rejection(lh.waitFor(id, { signal: controller.signal }));
    expect(isLeaseholdError(again, 'WAIT_ABORTED')).toBe(true);
  });

  it('rejects with JobNotFoundError for an id no job has, and ValidationError for bad arguments', async () => {
    const lh = await migratedClient();
    expect(await rejection(lh.waitFor('987654321'))).toBeInstanceOf(JobNotFoundError);
    expect(await rejection(lh.waitFor('not-an-id'))).toBeInstanceOf(ValidationError);
    const unknown = await rejection(lh.waitFor('1', { timeout: 5 } as never));
    expect((unknown as Error).message).toMatch(/timeoutMs/);
    expect(await rejection(lh.waitFor('1', { timeoutMs: -1 }))).toBeInstanceOf(ValidationError);
    expect(await rejection(lh.waitFor('1', { signal: {} as AbortSignal }))).toBeInstanceOf(ValidationError);
  });

  it('still resolves with notifications disabled: the poll finds the job', async () => {
    const lh = await migratedClient({ listen: false });
    const pool = testPool();
    const { id } = await lh.enqueue('polled', {});
    const waiting = lh.waitFor(id, { timeoutMs: 20_000 });
    const worker = await started(
      lh.worker({ queues: { polled: async () => 'found by polling' }, listen: false, pollIntervalMs: 50 }),
    );
    expect(await waiting).toMatchObject({ status: 'succeeded', result: 'found by polling' });
    expect(contextOf(lh).waiters.listening).toBe(false);
    // Nothing was flagged: no statement had a reason to notify.
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE notify_on_finish`,
    );
    expect(rows[0].n).toBe(0);
    await worker.stop();
  });

  it('many waits share one LISTEN connection and one read per notification', async () => {
    const lh = await migratedClient(listenOptions());
    const producer = await migratedClient({ schema: lh.schema });
    const { ids } = await producer.enqueueMany(
      'shared',
      Array.from({ length: 20 }, (_, i) => ({ payload: { i } })),
    );
    const waits = ids.map((id) => lh.waitFor(id, { timeoutMs: 20_000 }));
    await waitFor(() => contextOf(lh).waiters.listenerPid, { what: "the waiters' LISTEN connection" });
    const { rows } = await testPool().query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE application_name = 'leasehold-listener' AND query LIKE $1`,
      [`%${finishedChannel(lh.schema)}%`],
    );
    expect(rows[0].n).toBe(1);
    await started(producer.worker({ queues: { shared: async (job) => (job.payload as { i: number }).i } }));
    const results = await Promise.all(waits);
    expect(results.map((r) => r.result)).toEqual(ids.map((_, i) => i));
  });

  it('close() ends open waits with WaitAbortedError', async () => {
    const source = await migratedClient();
    const lh = new Leasehold({ connectionString: databaseUrl(), schema: source.schema });
    const { id } = await lh.enqueue('never', {});
    const waiting = rejection(lh.waitFor(id));
    await lh.close();
    const err = await waiting;
    expect(isLeaseholdError(err, 'WAIT_ABORTED')).toBe(true);
    expect((err as Error).message).toMatch(/client was closed/);
  });
});

describe('waiting under the least-privilege roles', () => {
  it('a producer (no UPDATE on jobs) flags the job through wait_for_jobs() and is woken by its notification', async () => {
    const owner = await migratedClient(listenOptions());
    // The schema's own roles (016), through their functions as operators run them.
    const producer = await roleClient(owner.schema, 'producer');
    const worker = await roleClient(owner.schema, 'worker');
    const { id } = await producer.enqueue('roles', { n: 1 });
    const waiting = producer.waitFor(id, { timeoutMs: 20_000 });
    await waitFor(
      async () => {
        const { rows } = await testPool().query(
          `SELECT notify_on_finish FROM "${owner.schema}".jobs WHERE id = $1`,
          [id],
        );
        return rows[0]?.notify_on_finish === true;
      },
      { what: "the producer's wait to flag the job" },
    );
    // The worker role completes it and writes its progress and result.
    await started(
      worker.worker({
        queues: {
          roles: async (job) => {
            await job.progress({ half: true });
            return { by: 'worker role' };
          },
        },
      }),
    );
    expect(await waiting).toMatchObject({ status: 'succeeded', result: { by: 'worker role' } });
  });
});

describe('lh.enqueueAndWait', () => {
  it('enqueues a task and resolves with its typed result', async () => {
    const lh = await migratedClient(listenOptions());
    const add = defineTask<{ a: number; b: number }, { sum: number }>('add', {
      handler: async (job) => ({ sum: job.payload.a + job.payload.b }),
    });
    await started(lh.worker({ tasks: [add] }));
    const { id, status, result } = await lh.enqueueAndWait(
      add,
      { a: 2, b: 3 },
      { priority: 5, timeoutMs: 20_000 },
    );
    expect(status).toBe('succeeded');
    expect(result.sum).toBe(5);
    expect((await lh.getJob(id))?.priority).toBe(5);
    // With an idempotency key already taken, it waits for the existing job.
    const first = await lh.enqueueAndWait('add', { a: 1, b: 1 }, { idempotencyKey: 'k' });
    const again = await lh.enqueueAndWait('add', { a: 9, b: 9 }, { idempotencyKey: 'k' });
    expect(again).toEqual(first);
  });

  it('refuses client (a job in an open transaction cannot run before it commits), writing nothing', async () => {
    const lh = await migratedClient();
    const err = await rejection(lh.enqueueAndWait('q', {}, { client: lh.pool } as never));
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).field).toBe('client');
    const { rows } = await testPool().query(`SELECT count(*)::int AS n FROM "${lh.schema}".jobs`);
    expect(rows[0].n).toBe(0);
  });
});
