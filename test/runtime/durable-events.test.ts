import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  type DatabaseError,
  type EventWaitResult,
  isLeaseholdError,
  type JobContext,
  Leasehold,
  ValidationError,
} from '../../src/index.js';
import { runCliInProcess } from '../support/cli-inprocess.js';
import {
  closeAfterTest,
  databaseUrl,
  migratedClient,
  testPool,
  uniqueSchema,
  waitFor,
} from '../support/db.js';
import { rejection } from '../support/rejection.js';
import { roleClient } from '../support/roles.js';
import { started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

type Pool = ReturnType<typeof testPool>;

async function jobRow(pool: Pool, schema: string, id: string) {
  const { rows } = await pool.query<{
    status: string;
    attempt_count: number;
    lease_owner: string | null;
    lease_expires_at: Date | null;
    later: boolean;
  }>(
    `SELECT status::text, attempt_count, lease_owner, lease_expires_at, available_at > now() + interval '10 minutes' AS later
     FROM "${schema}".jobs WHERE id = $1`,
    [id],
  );
  return rows[0];
}

async function waitingOn(pool: Pool, schema: string, ids: string[]) {
  await waitFor(
    async () => {
      const { rows } = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "${schema}".jobs AS j JOIN "${schema}".job_waits AS w ON w.job_id = j.id
         WHERE j.id = ANY ($1::bigint[]) AND j.status = 'pending'`,
        [ids],
      );
      return rows[0]?.n === ids.length;
    },
    { what: 'the jobs handed back to wait' },
  );
}

// A handler that waits for `confirmed` keyed by its payload's email, and records each resume.
function waiter(lh: Leasehold, seen: Map<string, EventWaitResult[]>, timeoutMs = 3_600_000) {
  return lh.worker({
    queues: {
      signup: async (job: JobContext) => {
        const got = await job.waitForEvent<{ at: string }>('confirmed', {
          key: (job.payload as { email: string }).email,
          timeoutMs,
        });
        seen.set(job.id, [...(seen.get(job.id) ?? []), got]);
        return got;
      },
    },
    pollIntervalMs: 50,
  });
}

describe('durable events', () => {
  it('the wait holds no lease and spends no attempt; one event wakes both jobs waiting on it, each once', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const a = await lh.enqueue('signup', { email: 'a@example.com' });
    const b = await lh.enqueue('signup', { email: 'a@example.com' });
    const other = await lh.enqueue('signup', { email: 'other@example.com' });
    const seen = new Map<string, EventWaitResult[]>();
    const worker = waiter(lh, seen);
    await started(worker);
    await waitingOn(pool, lh.schema, [a.id, b.id, other.id]);
    for (const id of [a.id, b.id]) {
      // Suspended: pending until the timeout an hour away, no lease, the claim's attempt given back.
      expect(await jobRow(pool, lh.schema, id)).toEqual({
        status: 'pending',
        attempt_count: 0,
        lease_owner: null,
        lease_expires_at: null,
        later: true,
      });
    }
    const sent = await lh.sendEvent('confirmed', { key: 'a@example.com', payload: { at: 'noon' } });
    expect(sent.woken).toBe(2);
    await waitFor(
      async () =>
        (await lh.getJob(a.id))?.status === 'succeeded' && (await lh.getJob(b.id))?.status === 'succeeded',
      {
        timeoutMs: 20_000,
        what: 'both waiting jobs resumed',
      },
    );
    for (const id of [a.id, b.id]) {
      expect(seen.get(id)).toEqual([{ timedOut: false, payload: { at: 'noon' } }]);
      expect(await lh.getJob(id)).toMatchObject({
        attemptCount: 1,
        result: { timedOut: false, payload: { at: 'noon' } },
      });
    }
    // A second event of that name and key wakes nothing: each job got the first one, once.
    expect((await lh.sendEvent('confirmed', { key: 'a@example.com', payload: { at: 'later' } })).woken).toBe(
      0,
    );
    // The job waiting on another key still waits.
    expect(await jobRow(pool, lh.schema, other.id)).toMatchObject({ status: 'pending', later: true });
    expect(seen.has(other.id)).toBe(false);
    await worker.stop();
  });

  it('an event sent inside a rolled-back transaction wakes nothing; committed, it wakes the job', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const job = await lh.enqueue('signup', { email: 'rb@example.com' });
    const seen = new Map<string, EventWaitResult[]>();
    const worker = waiter(lh, seen);
    await started(worker);
    await waitingOn(pool, lh.schema, [job.id]);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const inTx = await lh.sendEvent(
        'confirmed',
        { key: 'rb@example.com', payload: { at: 'never' } },
        { client },
      );
      expect(inTx.woken).toBe(1);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    const sentRows = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".job_events_sent`);
    expect(sentRows.rows[0].n).toBe(0);
    expect(await jobRow(pool, lh.schema, job.id)).toMatchObject({ status: 'pending', later: true });
    const wait = await pool.query(`SELECT woken_at FROM "${lh.schema}".job_waits WHERE job_id = $1`, [
      job.id,
    ]);
    expect(wait.rows).toEqual([{ woken_at: null }]);
    expect(seen.has(job.id)).toBe(false);

    const committed = await pool.connect();
    try {
      await committed.query('BEGIN');
      await lh.sendEvent(
        'confirmed',
        { key: 'rb@example.com', payload: { at: 'now' } },
        { client: committed },
      );
      await committed.query('COMMIT');
    } finally {
      committed.release();
    }
    await waitFor(async () => (await lh.getJob(job.id))?.status === 'succeeded', {
      timeoutMs: 20_000,
      what: 'woken',
    });
    expect(seen.get(job.id)).toEqual([{ timedOut: false, payload: { at: 'now' } }]);
    await worker.stop();
  });

  it('an event sent before the wait started wakes it at once', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    await lh.sendEvent('confirmed', { key: 'early@example.com', payload: { at: 'dawn' } });
    const job = await lh.enqueue('signup', { email: 'early@example.com' });
    const seen = new Map<string, EventWaitResult[]>();
    const worker = waiter(lh, seen);
    const outcomes: string[] = [];
    worker.on('outcome', (_job, outcome) => outcomes.push(outcome));
    await started(worker);
    await waitFor(async () => (await lh.getJob(job.id))?.status === 'succeeded', {
      timeoutMs: 20_000,
      what: 'done',
    });
    // The row commits before the worker reads the completion's answer and emits its outcome.
    await waitFor(() => outcomes.length >= 1, { what: 'the outcome emitted' });
    // Found while the job still held its first lease: never handed back.
    expect(outcomes).toEqual(['completed']);
    expect(seen.get(job.id)).toEqual([{ timedOut: false, payload: { at: 'dawn' } }]);
    await worker.stop();
  });

  it('a wait that begins while an event is being sent in an open transaction waits for its commit, then takes it', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const sender = await pool.connect();
    try {
      await sender.query('BEGIN');
      // Sent before any job waits: it wakes nobody now, and its transaction stays open.
      const sent = await lh.sendEvent(
        'confirmed',
        { key: 'race@example.com', payload: { at: 'commit' } },
        { client: sender },
      );
      expect(sent.woken).toBe(0);
      const job = await lh.enqueue('signup', { email: 'race@example.com' });
      const seen = new Map<string, EventWaitResult[]>();
      const worker = waiter(lh, seen);
      const outcomes: string[] = [];
      worker.on('outcome', (_job, outcome) => outcomes.push(outcome));
      await started(worker);
      // The wait is recorded, and the job, still running, waits for the sender to finish.
      await waitFor(
        async () => {
          const { rows } = await pool.query(`SELECT 1 FROM "${lh.schema}".job_waits WHERE job_id = $1`, [
            job.id,
          ]);
          return rows.length === 1;
        },
        { what: 'the wait recorded' },
      );
      expect((await lh.getJob(job.id))?.status).toBe('running');
      await sender.query('COMMIT');
      await waitFor(async () => (await lh.getJob(job.id))?.status === 'succeeded', {
        timeoutMs: 20_000,
        what: 'done',
      });
      await waitFor(() => outcomes.length >= 1, { what: 'the outcome emitted' });
      // Not handed back for its hour-long timeout: the committed event was found at once.
      expect(outcomes).toEqual(['completed']);
      expect(seen.get(job.id)).toEqual([{ timedOut: false, payload: { at: 'commit' } }]);
      await worker.stop();
    } finally {
      await sender.query('ROLLBACK').catch(() => undefined);
      sender.release();
    }
  });

  it('a timeout resumes the job with { timedOut: true }, recorded, not thrown', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    const job = await lh.enqueue('signup', { email: 'late@example.com' });
    const seen = new Map<string, EventWaitResult[]>();
    const worker = waiter(lh, seen, 1500);
    const outcomes: string[] = [];
    worker.on('outcome', (_job, outcome) => outcomes.push(outcome));
    await started(worker);
    await waitFor(async () => (await lh.getJob(job.id))?.status === 'succeeded', {
      timeoutMs: 20_000,
      what: 'timed out',
    });
    await waitFor(() => outcomes.length >= 2, { what: 'both outcomes emitted' });
    expect(outcomes).toEqual(['snoozed', 'completed']);
    expect(seen.get(job.id)).toEqual([{ timedOut: true }]);
    expect(await lh.getJob(job.id)).toMatchObject({ attemptCount: 1, result: { timedOut: true } });
    const steps = await pool.query(
      `SELECT name, kind, result FROM "${lh.schema}".job_steps WHERE job_id = $1`,
      [job.id],
    );
    expect(steps.rows).toEqual([{ name: 'confirmed#0', kind: 'wait', result: { timedOut: true } }]);
    const waits = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".job_waits`);
    expect(waits.rows[0].n).toBe(0);
    // `leasehold jobs show` prints the wait with its timeout, never the payload.
    const shown = await runCliInProcess([
      'jobs',
      'show',
      job.id,
      '--database-url',
      databaseUrl(),
      '--schema',
      lh.schema,
    ]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/step\s+1\s+\S+\s+1\s+wait confirmed#0 for its event until \S+/);
    await worker.stop();
  });

  it('under the producer and worker roles, the wait and the send go through their functions; neither may write the tables', async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const producer = await roleClient(owner.schema, 'producer');
    const workerRole = await roleClient(owner.schema, 'worker', { backoff: noBackoff });
    const pool = testPool();
    const job = await producer.enqueue('signup', { email: 'role@example.com' });
    const seen = new Map<string, EventWaitResult[]>();
    const worker = waiter(workerRole, seen);
    await started(worker);
    await waitingOn(pool, owner.schema, [job.id]);
    expect(
      (await producer.sendEvent('confirmed', { key: 'role@example.com', payload: { at: 'one' } })).woken,
    ).toBe(1);
    await waitFor(async () => (await owner.getJob(job.id))?.status === 'succeeded', {
      timeoutMs: 20_000,
      what: 'woken',
    });
    expect(seen.get(job.id)).toEqual([{ timedOut: false, payload: { at: 'one' } }]);
    for (const lh of [producer, workerRole]) {
      await expect(
        lh.pool.query(`INSERT INTO "${owner.schema}".job_events_sent (name, key) VALUES ('confirmed', 'x')`),
      ).rejects.toThrow(/permission denied/);
      await expect(lh.pool.query(`UPDATE "${owner.schema}".job_waits SET woken_at = now()`)).rejects.toThrow(
        /permission denied/,
      );
    }
    await worker.stop();
  });

  it('bad names, keys, timeouts and payloads are ValidationErrors, nothing written', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await expect(lh.sendEvent('bad name', { key: 'k' })).rejects.toBeInstanceOf(ValidationError);
    await expect(lh.sendEvent('ok', { key: '' })).rejects.toBeInstanceOf(ValidationError);
    await expect(lh.sendEvent('ok', { key: 'k'.repeat(201) })).rejects.toBeInstanceOf(ValidationError);
    await expect(lh.sendEvent('ok', { key: 'k', payload: 'x'.repeat(1_048_577) })).rejects.toBeInstanceOf(
      ValidationError,
    );
    const sent = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".job_events_sent`);
    expect(sent.rows[0].n).toBe(0);
    const errors: unknown[] = [];
    const job = await lh.enqueue('bad-wait', {});
    const worker = lh.worker({
      queues: {
        'bad-wait': async (j: JobContext) => {
          try {
            await j.waitForEvent('e', { key: 'k', timeoutMs: -1 });
          } catch (err) {
            errors.push(err);
          }
          return null;
        },
      },
      pollIntervalMs: 50,
    });
    await started(worker);
    await waitFor(async () => (await lh.getJob(job.id))?.status === 'succeeded', { what: 'ran' });
    expect(errors[0]).toBeInstanceOf(ValidationError);
    await worker.stop();
  });

  it('a send the database refuses, at connect included, rejects typed (DATABASE), never with a raw driver error', async () => {
    // A loopback port nothing listens on: the pool's connect is refused (ECONNREFUSED, no SQLSTATE).
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const url = new URL(databaseUrl());
    url.hostname = '127.0.0.1';
    url.port = String(typeof address === 'object' && address ? address.port : 0);
    const lh = closeAfterTest(new Leasehold({ connectionString: url.toString(), schema: uniqueSchema() }));
    const err = await rejection(lh.sendEvent('confirmed', { key: 'k', payload: {} }));
    expect(isLeaseholdError(err, 'DATABASE')).toBe(true);
    expect((err as DatabaseError).errno).toBe('ECONNREFUSED');
    expect((err as DatabaseError).message).toMatch(/^sendEvent failed: /);
  });
});
