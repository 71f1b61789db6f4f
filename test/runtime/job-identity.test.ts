import { afterAll, describe, expect, it } from 'vitest';
import { type JobContext, type Leasehold, Leasehold as LeaseholdClient } from '../../src/index.js';
import { migrate } from '../../src/migrations/migrator.js';
import { type ClaimShape, claimJobsAs } from '../../src/storage/leases/claim.js';
import { databaseUrl, dropSchema, migratedClient, testPool, uniqueSchema, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

// Job identities (migration 027, issue 31): a job's idempotency key, and every effect key derived
// from it, must never be another job's, even when a failover made the database hand out an id
// again. The failover itself (a standby promoted behind the primary's id sequence) is
// test/runtime/failover-job-identity.test.ts; here the sequence is set back by hand, which is what
// such a promotion leaves behind, so the case runs on any server.

interface Seen {
  id: string;
  key: string;
  effectKey: string;
}

/** Runs the jobs of `queue` until `count` have run, recording each one's keys. */
async function runAndRecord(lh: Leasehold, queue: string, count: number): Promise<Seen[]> {
  const seen: Seen[] = [];
  const worker = lh.worker({
    queues: {
      [queue]: async (job: JobContext) => {
        const effectKey = await job.effect('charge', { perform: (key) => key });
        seen.push({ id: job.id, key: job.idempotencyKey, effectKey });
      },
    },
    pollIntervalMs: 20,
  });
  await started(worker);
  try {
    await waitFor(() => seen.length >= count, { what: `${count} jobs of ${queue} to run` });
  } finally {
    await worker.stop();
  }
  return seen;
}

describe('job identities across a reissued id', () => {
  it('two different jobs given one id get different idempotency and effect keys', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const { id } = await lh.enqueue('identity-reissued', { n: 1 });
    const [first] = await runAndRecord(lh, 'identity-reissued', 1);
    expect(first?.id).toBe(id);
    // The finished record carries the job's identity (the completion copies it).
    const { rows: finished } = await pool.query<{ job_uid: string | null }>(
      `SELECT job_uid::text FROM "${lh.schema}".finished_jobs WHERE id = $1`,
      [id],
    );
    expect(finished[0]?.job_uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(first?.key).toBe(`${lh.schema}:${id}:${finished[0]?.job_uid}`);

    // What a standby promoted behind the primary leaves: the acknowledged job is gone with all that
    // was written after its enqueue (its effects ledger too: WAL is replayed in order), and the id
    // sequence stands where it stood before that job was enqueued.
    await pool.query(`DELETE FROM "${lh.schema}".finished_jobs WHERE id = $1`, [id]);
    await pool.query(`DELETE FROM "${lh.schema}".job_effects WHERE job_id = $1`, [id]);
    // setval(..., false): the next id drawn is the lost job's.
    await pool.query(
      `SELECT setval(pg_get_serial_sequence('"${lh.schema}".jobs', 'id'), $1::bigint, false)`,
      [id],
    );
    const { id: reissued } = await lh.enqueue('identity-reissued', { n: 2 });
    expect(reissued).toBe(id);
    const [second] = await runAndRecord(lh, 'identity-reissued', 1);

    expect(second?.id).toBe(id);
    expect(second?.key).not.toBe(first?.key);
    expect(second?.effectKey).not.toBe(first?.effectKey);
    expect(second?.effectKey).toBe(`${second?.key}:charge`);
  });

  it('a job enqueued before 027 keeps its key schema:id; one enqueued after gets a new-form key', async () => {
    const schema = uniqueSchema('lh_identity_mig');
    const pool = testPool(2);
    afterAll(() => dropSchema(schema));
    await migrate(pool, schema, { upTo: 25 });
    const lh = new LeaseholdClient({ connectionString: databaseUrl(), schema, poolSize: 4 });
    try {
      const { id: before } = await lh.enqueue('identity-upgrade', { n: 1 });
      await lh.migrate();
      const { id: after } = await lh.enqueue('identity-upgrade', { n: 2 });
      const { rows } = await pool.query<{ id: string; job_uid: string | null }>(
        `SELECT id::text, job_uid::text FROM "${schema}".jobs WHERE id = ANY ($1::bigint[]) ORDER BY id`,
        [[before, after]],
      );
      expect(rows.map((r) => [r.id, r.job_uid === null])).toEqual([
        [before, true],
        [after, false],
      ]);
      const seen = await runAndRecord(lh, 'identity-upgrade', 2);
      const byId = new Map(seen.map((s) => [s.id, s]));
      expect(byId.get(before)?.key).toBe(`${schema}:${before}`);
      expect(byId.get(before)?.effectKey).toBe(`${schema}:${before}:charge`);
      expect(byId.get(after)?.key).toBe(`${schema}:${after}:${rows[1]?.job_uid}`);
    } finally {
      await lh.close();
    }
  });

  it('a process of this version claims with every shape on a schema before 027, and returns the identity once 027 ran', async () => {
    // A rolling upgrade: workers of this version run before the migration does. Each claim names
    // jobs.job_uid, fails there (42703), and falls back to its twin that reads the row without
    // naming the column (UidRead 'anySchema'), which returns the identity as soon as it exists.
    const schema = uniqueSchema('lh_identity_shapes');
    const pool = testPool(2);
    await migrate(pool, schema, { upTo: 25 });
    const lh = new LeaseholdClient({ connectionString: databaseUrl(), schema, poolSize: 2 });
    const shapes: [string, ClaimShape, Parameters<Leasehold['configureQueue']>[1] | null][] = [
      ['uid-plain', { candidates: 'preference', limit: 'none' }, null],
      ['uid-per-key', { candidates: 'preference', limit: 'per-key' }, { concurrencyLimitPerKey: 5 }],
      [
        'uid-throttled',
        { candidates: 'preference', limit: 'throttle' },
        { rateLimit: { max: 100, perMs: 1000 } },
      ],
      ['uid-fair', { candidates: 'turns', limit: 'none' }, { fairness: 'round-robin' }],
      [
        'uid-fair-per-key',
        { candidates: 'turns', limit: 'per-key' },
        { fairness: 'round-robin', concurrencyLimitPerKey: 5 },
      ],
    ];
    const claimOne = async (queue: string, shape: ClaimShape) => {
      await lh.enqueue(queue, { n: 1 }, { concurrencyKey: 'k', fairnessKey: 'f' });
      const { rows } = await claimJobsAs(pool, schema, shape, {
        queue,
        owner: 'o',
        limit: 5,
        leaseMs: 30_000,
      });
      return rows.map((row) => row.job_uid);
    };
    try {
      for (const [queue, , settings] of shapes) if (settings) await lh.configureQueue(queue, settings);
      for (const [queue, shape] of shapes)
        expect({ queue, uids: await claimOne(queue, shape) }).toEqual({ queue, uids: [null] });
      await lh.migrate();
      for (const [queue, shape] of shapes) {
        const uids = await claimOne(queue, shape);
        expect({ queue, uids }).toEqual({ queue, uids: [expect.stringMatching(/^[0-9a-f-]{36}$/)] });
      }
    } finally {
      await lh.close();
      await dropSchema(schema);
    }
  });

  it('a retried job keeps its identity, so its key is the same on every attempt', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const { id } = await lh.enqueue('identity-retry', { n: 1 }, { maxAttempts: 2 });
    const keys: string[] = [];
    const worker = lh.worker({
      queues: {
        'identity-retry': async (job) => {
          keys.push(job.idempotencyKey);
          if (job.attempt === 1) throw new Error('first attempt fails');
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    try {
      await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', {
        what: 'the retry to succeed',
      });
    } finally {
      await worker.stop();
    }
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect(keys[0]).toMatch(new RegExp(`^${lh.schema}:${id}:[0-9a-f-]{36}$`));
  });
});
