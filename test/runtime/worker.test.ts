import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  type AbortReason,
  type JobContext,
  Leasehold,
  PermanentError,
  RetryableError,
  SnoozeError,
  ValidationError,
} from '../../src/index.js';
import {
  countByStatus,
  databaseUrl,
  listenOptions,
  migratedClient,
  testPool,
  waitFor,
} from '../support/db.js';
import { leaseholdWarnings } from '../support/leasehold-warnings.js';
import { deferred, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

describe('worker', () => {
  it('runs each of N jobs exactly once with concurrency K when nothing fails', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany(
      'exact',
      Array.from({ length: 600 }, (_, i) => ({ payload: { i } })),
    );
    const runs = new Map<number, number>();
    let inFlight = 0;
    let maxInFlight = 0;
    const worker = lh.worker({
      queues: {
        exact: {
          concurrency: 7,
          handler: async (job) => {
            inFlight++;
            maxInFlight = Math.max(maxInFlight, inFlight);
            const { i } = job.payload as { i: number };
            runs.set(i, (runs.get(i) ?? 0) + 1);
            await new Promise((resolve) => setImmediate(resolve));
            inFlight--;
          },
        },
      },
    });
    await started(worker);
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 600, {
      what: '600 succeeded',
    });
    // The rows commit before the worker reads the statement's answer: wait for every answer.
    await waitFor(() => worker.counters.completed + worker.counters.lost === 600, {
      what: '600 answers counted',
    });
    expect(runs.size).toBe(600);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(maxInFlight).toBeLessThanOrEqual(7);
    expect(maxInFlight).toBeGreaterThan(1);
    expect(worker.counters).toMatchObject({ claimed: 600, completed: 600, lost: 0 });
  });

  it('with prefetch, claims ahead into a buffer but never runs more handlers than its concurrency, and hands unstarted jobs back at stop', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany(
      'ahead',
      Array.from({ length: 300 }, (_, i) => ({ payload: i })),
    );
    const gate = deferred();
    let inFlight = 0;
    let maxInFlight = 0;
    const worker = lh.worker({
      queues: {
        ahead: {
          concurrency: 3,
          prefetch: 40,
          handler: async () => {
            inFlight++;
            maxInFlight = Math.max(maxInFlight, inFlight);
            await gate.promise;
            inFlight--;
          },
        },
      },
      shutdownTimeoutMs: 5000,
    });
    await started(worker);
    // Three handlers wait on the gate; the buffer fills with leased jobs that have not started.
    // (The claim is visible in the table a moment before the worker has read its answer and
    // started the handlers: wait for both.)
    await waitFor(async () => inFlight === 3 && (await countByStatus(pool, lh.schema)).running === 43, {
      what: '43 leases held and three handlers started',
    });
    expect(maxInFlight).toBe(3);
    const stopping = worker.stop();
    gate.resolve();
    await stopping;
    const counts = await countByStatus(pool, lh.schema);
    expect(counts).toEqual({ succeeded: 3, pending: 297 });
    // The 40 buffered jobs went back with their attempt refunded.
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE attempt_count > 0 AND status = 'pending'`,
    );
    expect(rows[0].n).toBe(0);
  });

  it('with prefetch, runs each job exactly once at full speed', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany(
      'fast',
      Array.from({ length: 3000 }, (_, i) => ({ payload: i })),
    );
    const runs = new Map<number, number>();
    const worker = lh.worker({
      queues: {
        fast: {
          concurrency: 4,
          prefetch: 200,
          handler: async (job) => {
            runs.set(job.payload as number, (runs.get(job.payload as number) ?? 0) + 1);
          },
        },
      },
    });
    await started(worker);
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 3000, {
      what: 'all done',
    });
    await waitFor(() => worker.counters.completed + worker.counters.lost === 3000, {
      what: '3000 answers counted',
    });
    expect(runs.size).toBe(3000);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(worker.counters).toMatchObject({ claimed: 3000, completed: 3000, lost: 0 });
  });

  it('passes the job context: id, attempt, token, owner and an idempotency key that is the same on every attempt', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('ctx', { hello: 'world' }, { maxAttempts: 3 });
    const seen: Omit<JobContext, 'progress' | 'snooze' | 'signal'>[] = [];
    const worker = lh.worker({
      owner: 'ctx-worker',
      queues: {
        ctx: {
          backoff: noBackoff,
          handler: async (job) => {
            seen.push({ ...job, payload: job.payload });
            if (job.attempt === 1) throw new RetryableError('try again', { delayMs: 0 });
          },
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded');
    expect(seen.map((s) => [s.id, s.queue, s.attempt, s.token, s.owner, s.maxAttempts])).toEqual([
      [id, 'ctx', 1, '1', 'ctx-worker', 3],
      [id, 'ctx', 2, '2', 'ctx-worker', 3],
    ]);
    expect(seen[0]?.payload).toEqual({ hello: 'world' });
    expect(seen[0]?.idempotencyKey).toBe(seen[1]?.idempotencyKey);
    expect(seen[0]?.idempotencyKey).toContain(id);
  });

  it('sends a PermanentError to dead on the first attempt, with its code', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('perm', {}, { maxAttempts: 5 });
    const worker = lh.worker({
      queues: {
        perm: async () => {
          throw new PermanentError('unsupported schema version 9', { code: 'UNSUPPORTED_VERSION' });
        },
      },
    });
    await started(worker);
    const job = await waitFor(async () => {
      const j = await lh.getJob(id);
      return j?.status === 'dead' ? j : null;
    });
    expect(job).toMatchObject({
      attemptCount: 1,
      lastErrorCode: 'UNSUPPORTED_VERSION',
      lastErrorClass: 'PermanentError',
      lastErrorMessage: 'unsupported schema version 9',
    });
  });

  it('gives unknown errors a smaller retry budget than RetryableError, with full diagnostics', async () => {
    const lh = await migratedClient();
    const unknown = await lh.enqueue('unknown', { kind: 'unknown' }, { maxAttempts: 8 });
    const retryable = await lh.enqueue('unknown', { kind: 'retryable' }, { maxAttempts: 5 });
    const worker = lh.worker({
      queues: {
        unknown: {
          backoff: noBackoff,
          unknownErrorAttempts: 2,
          handler: async (job) => {
            if ((job.payload as { kind: string }).kind === 'unknown')
              throw new TypeError('cannot read x of undefined');
            throw new RetryableError('downstream 503', { code: 'HTTP_503', delayMs: 0 });
          },
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    await waitFor(async () => {
      const [a, b] = await Promise.all([lh.getJob(unknown.id), lh.getJob(retryable.id)]);
      return a?.status === 'dead' && b?.status === 'dead';
    });
    const [a, b] = await Promise.all([lh.getJob(unknown.id), lh.getJob(retryable.id)]);
    expect(a).toMatchObject({ attemptCount: 2, lastErrorCode: 'ERROR', lastErrorClass: 'TypeError' });
    expect(a?.lastErrorStack).toContain('TypeError: cannot read x of undefined');
    expect(b).toMatchObject({ attemptCount: 5, lastErrorCode: 'HTTP_503', lastErrorClass: 'RetryableError' });
  });

  it('snoozes without spending an attempt', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('snooze', {}, { maxAttempts: 1 });
    let calls = 0;
    const worker = lh.worker({
      queues: {
        snooze: async (job) => {
          calls++;
          if (calls === 1) throw new SnoozeError(10);
          if (calls === 2) job.snooze(10);
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    const job = await waitFor(async () => {
      const j = await lh.getJob(id);
      return j?.status === 'succeeded' ? j : null;
    });
    // Three runs with max_attempts = 1: the two snoozes gave their attempts back.
    expect(calls).toBe(3);
    expect(job.attemptCount).toBe(1);
    expect(worker.counters.snoozed).toBe(2);
  });

  it('aborts the signal at maxRuntimeMs and records a time-out', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('slowpoke', {}, { maxAttempts: 1 });
    const reasons: AbortReason[] = [];
    let sawAbort = false;
    const worker = lh.worker({
      queues: {
        slowpoke: {
          maxRuntimeMs: 300,
          leaseMs: 5000,
          renew: 'alive',
          handler: (job) =>
            new Promise((_resolve, reject) => {
              job.signal.addEventListener('abort', () => {
                sawAbort = true;
                reject(job.signal.reason);
              });
            }),
        },
      },
    });
    worker.on('aborted', (_job, reason) => reasons.push(reason));
    await started(worker);
    const job = await waitFor(async () => {
      const j = await lh.getJob(id);
      return j?.status === 'dead' ? j : null;
    });
    expect(sawAbort).toBe(true);
    expect(reasons).toEqual(['max-runtime']);
    expect(job).toMatchObject({ lastErrorCode: 'TIMEOUT', attemptCount: 1 });
  });

  it('aborts the signal when the lease is lost, and writes nothing for that run', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue('stolen', {});
    const running = deferred();
    const reasons: AbortReason[] = [];
    const worker = lh.worker({
      queues: {
        stolen: {
          leaseMs: 600,
          renew: 'alive',
          handler: (job) =>
            new Promise<void>((resolve) => {
              running.resolve();
              job.signal.addEventListener('abort', () => resolve());
            }),
        },
      },
      recoveryIntervalMs: 0,
    });
    worker.on('aborted', (_job, reason) => reasons.push(reason));
    await started(worker);
    await running.promise;
    // Another claim takes the job over: the token moves on, so this worker's renewal is refused.
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET lease_token = lease_token + 1, lease_owner = 'someone-else' WHERE id = $1`,
      [id],
    );
    await waitFor(() => reasons.length > 0, { what: 'abort' });
    expect(reasons).toEqual(['lease-lost']);
    // Nobody listens to leaseLost and no logger is set: the loss is said once, as a process warning.
    const said = () => leaseholdWarnings('LEASEHOLD_LEASE_LOST').filter((m) => m.includes('(queue stolen,'));
    await waitFor(() => said().length > 0, { what: 'the lease-loss warning' });
    expect(said()).toEqual([
      expect.stringMatching(/^leasehold: job \d+ \(queue stolen, attempt 1\/\d+\) lost its lease/),
    ]);
    await waitFor(() => worker.activeCount === 0);
    expect(await lh.getJob(id)).toMatchObject({ status: 'running', leaseOwner: 'someone-else' });
    expect((await lh.leaseRefusals()).map((r) => [r.operation, r.count])).toEqual([['heartbeat', 1]]);
    expect(worker.counters.completed).toBe(0);
  });

  it("under renew: 'progress', a job that reports no progress loses its lease; one that does keeps it", async () => {
    const lh = await migratedClient();
    const quiet = await lh.enqueue('progress', { reports: false });
    const chatty = await lh.enqueue('progress', { reports: true });
    const reasons = new Map<string, AbortReason>();
    const worker = lh.worker({
      queues: {
        progress: {
          leaseMs: 1000,
          renew: 'progress',
          concurrency: 2,
          handler: async (job) => {
            const reports = (job.payload as { reports: boolean }).reports;
            // Run for two and a half lease lengths.
            for (let i = 0; i < 25 && !job.signal.aborted; i++) {
              await new Promise((resolve) => setTimeout(resolve, 100));
              if (reports) expect(await job.progress({ step: i })).toBe(true);
            }
            if (job.signal.aborted) throw job.signal.reason;
          },
        },
      },
      recoveryIntervalMs: 0,
    });
    worker.on('aborted', (job, reason) => reasons.set(job.id, reason));
    await started(worker);
    await waitFor(async () => (await lh.getJob(chatty.id))?.status === 'succeeded', {
      what: 'chatty job done',
    });
    await waitFor(() => reasons.has(quiet.id));
    expect(reasons.get(quiet.id)).toBe('lease-deadline');
    expect(reasons.has(chatty.id)).toBe(false);
    // The quiet job was not reported at all: still running in the table until its lease lapses.
    expect((await lh.getJob(quiet.id))?.status).toBe('running');
  });

  it('reports a handler that ignores its aborted signal as stuck, keeps its slot, and refuses its late result', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const { id } = await lh.enqueue('stuck', {});
    const release = deferred();
    let runs = 0;
    const stuck: string[] = [];
    const worker = lh.worker({
      queues: {
        stuck: {
          // Long enough for the second run's completion to land within its lease on a loaded
          // machine (with 300 ms, CI once saw it lapse and a third attempt run).
          leaseMs: 1000,
          // Renewed only on progress, which it never reports: aborted at its lease deadline.
          renew: 'progress',
          concurrency: 1,
          handler: async () => {
            runs++;
            if (runs === 1) await release.promise; // ignores job.signal
          },
        },
      },
      recoveryIntervalMs: 50,
      pollIntervalMs: 20,
    });
    worker.on('stuck', (job) => stuck.push(job.id));
    await started(worker);
    await waitFor(() => stuck.length > 0, { what: 'stuck event' });
    expect(stuck).toEqual([id]);
    // Recovered meanwhile, but the only slot is still taken by the stuck handler.
    await waitFor(async () => (await lh.getJob(id))?.status === 'pending', { what: 'recovery' });
    expect(runs).toBe(1);
    release.resolve();
    const job = await waitFor(async () => {
      const j = await lh.getJob(id);
      return j?.status === 'succeeded' ? j : null;
    });
    expect(job.attemptCount).toBe(2);
    expect(worker.counters).toMatchObject({ stuck: 1, lost: 1, completed: 1 });
  });

  it('stop() lets running handlers finish, then aborts the rest and hands their leases back', async () => {
    const lh = await migratedClient();
    const { ids } = await lh.enqueueMany('drain', [{ payload: 'quick' }, { payload: 'endless' }]);
    const bothRunning = deferred();
    let started2 = 0;
    const finishQuick = deferred();
    const worker = lh.worker({
      queues: {
        drain: {
          concurrency: 2,
          renew: 'alive',
          handler: async (job) => {
            if (++started2 === 2) bothRunning.resolve();
            if (job.payload === 'quick') return finishQuick.promise;
            await new Promise((resolve) => job.signal.addEventListener('abort', resolve));
          },
        },
      },
      shutdownTimeoutMs: 300,
    });
    await started(worker);
    await bothRunning.promise;
    const stopping = worker.stop();
    finishQuick.resolve();
    await stopping;
    const [quick, endless] = await Promise.all(ids.map((id) => lh.getJob(id)));
    expect(quick?.status).toBe('succeeded');
    // Handed back: claimable at once by another worker, the aborted attempt refunded, no live lease.
    expect(endless).toMatchObject({
      status: 'pending',
      attemptCount: 0,
      leaseOwner: null,
      leaseExpiresAt: null,
    });
    const [again] = await lh.claim({ queue: 'drain', owner: 'next' });
    expect(again?.jobId).toBe(ids[1]);
  });

  it('stop() returns even when the database never answers the outcome writes, leaving the job to recovery', async () => {
    const setup = await migratedClient();
    // Every completion fails as if the server were unreachable; everything else works.
    class CompletionRefusingPool extends pg.Pool {
      override query(config: unknown, values?: unknown): never {
        // Named, or unnamed behind a pooler with the name in a leading comment.
        const { name, text } = (config ?? {}) as { name?: string; text?: string };
        if ((name ?? text ?? '').includes('complete_jobs'))
          return Promise.reject(new Error('injected: server gone')) as never;
        return (super.query as (c: unknown, v?: unknown) => never)(config, values);
      }
    }
    const pool = new CompletionRefusingPool({ connectionString: databaseUrl(), max: 4 });
    const lh = new Leasehold({ pool, schema: setup.schema });
    const { id } = await lh.enqueue('unreachable', {});
    const ran = deferred();
    const worker = lh.worker({
      queues: { unreachable: async () => ran.resolve() },
      shutdownTimeoutMs: 300,
      recoveryIntervalMs: 0,
    });
    const errors: unknown[] = [];
    worker.on('error', (err) => errors.push(err));
    try {
      await started(worker);
      await ran.promise;
      await worker.stop();
      expect(errors.some((err) => String(err).includes('abandoned'))).toBe(true);
      // Nothing was written: the job is still running under its lease, for the sweep to return.
      expect((await setup.getJob(id))?.status).toBe('running');
    } finally {
      await pool.end();
    }
  });

  it('a NOTIFY wakes an idle worker long before its poll interval', async () => {
    const lh = await migratedClient(listenOptions());
    const handled = deferred<string>();
    const worker = lh.worker({
      queues: { wake: async (job) => handled.resolve(job.id) },
      pollIntervalMs: 3_600_000,
    });
    await started(worker);
    await waitFor(() => worker.listenerPid !== null, { what: 'listener' });
    // Let the start-up claim find the queue empty, so only a notification can bring the job in.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const { id } = await lh.enqueue('wake', {});
    const winner = await Promise.race([
      handled.promise,
      new Promise<string>((resolve) => setTimeout(() => resolve('no wake-up within 5 s'), 5000)),
    ]);
    expect(winner).toBe(id);
  });

  it('with every listener disconnected, polling still drains committed jobs, and the listener comes back', async () => {
    const lh = await migratedClient(listenOptions());
    const pool = testPool();
    const worker = lh.worker({
      queues: { orphaned: { concurrency: 5, handler: async () => {} } },
      pollIntervalMs: 200,
    });
    const errors: unknown[] = [];
    worker.on('error', (err) => errors.push(err));
    await started(worker);
    const firstPid = await waitFor(() => worker.listenerPid, { what: 'listener' });
    const { rows } = await pool.query(`SELECT application_name, query FROM pg_stat_activity WHERE pid = $1`, [
      firstPid,
    ]);
    expect(rows[0]).toMatchObject({ application_name: 'leasehold-listener' });
    expect(rows[0].query).toMatch(/^LISTEN/);
    await pool.query('SELECT pg_terminate_backend($1)', [firstPid]);
    await lh.enqueueMany(
      'orphaned',
      Array.from({ length: 50 }, (_, i) => ({ payload: i })),
    );
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 50, {
      what: 'drained by polling',
    });
    const secondPid = await waitFor(
      () => {
        const pid = worker.listenerPid;
        return pid !== null && pid !== firstPid ? pid : null;
      },
      { what: 'listener back' },
    );
    expect(secondPid).not.toBe(firstPid);
    expect(errors.length).toBeGreaterThan(0);
  });

  it('a poll-only worker (listen: false) drains the queue and opens no listener', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await lh.enqueueMany(
      'polled',
      Array.from({ length: 20 }, (_, i) => ({ payload: i })),
    );
    const worker = lh.worker({ queues: { polled: async () => {} }, listen: false, pollIntervalMs: 50 });
    await started(worker);
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 20);
    expect(worker.listenerPid).toBeNull();
  });

  it('refuses bad worker options with a ValidationError that suggests the fix', async () => {
    const lh = await migratedClient();
    expect(() => lh.worker({ queues: {} })).toThrow(ValidationError);
    expect(() => lh.worker({ queues: { 'bad name': async () => {} } })).toThrow(ValidationError);
    expect(() =>
      // @ts-expect-error a misspelt option
      lh.worker({ queues: { q: { handler: async () => {}, concurency: 2 } } }),
    ).toThrow(/did you mean concurrency/);
    expect(() => lh.worker({ queues: { q: { handler: async () => {}, leaseMs: 0 } } })).toThrow(
      ValidationError,
    );
    // @ts-expect-error a wrong renew policy
    expect(() => lh.worker({ queues: { q: { handler: async () => {}, renew: 'forever' } } })).toThrow(
      /renew/,
    );
  });

  it('cannot be started twice', async () => {
    const lh = await migratedClient();
    const worker = await started(lh.worker({ queues: { q: async () => {} } }));
    await expect(worker.start()).rejects.toMatchObject({ code: 'WORKER_STATE' });
  });
});
