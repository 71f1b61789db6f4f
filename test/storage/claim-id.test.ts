import { describe, expect, it } from 'vitest';
import { findLandedOutcomes } from '../../src/storage/leases/outcome-lookup.js';
import { countByStatus, expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

describe('the claim id beside the fencing token', () => {
  it('gives every claim statement a fresh random claim id, stored on the rows it claims', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    await lh.enqueueMany('ids', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    const first = await lh.claim({ queue: 'ids', owner: 'w', limit: 2 });
    const [second] = await lh.claim({ queue: 'ids', owner: 'w', limit: 1 });
    expect(first).toHaveLength(2);
    expect(first[0]?.claimId).toMatch(/^-?[0-9]+$/);
    expect(second?.claimId).not.toBe(first[0]?.claimId);
    const { rows } = await pool.query<{ id: string; lease_claim_id: string }>(
      `SELECT id::text, lease_claim_id::text FROM "${lh.schema}".jobs ORDER BY id`,
    );
    for (const lease of [...first, second!]) {
      expect(rows.find((row) => row.id === lease.jobId)?.lease_claim_id).toBe(lease.claimId);
    }
  });

  it("stamps a retried job with its new claim's id, not the id of the attempt before", async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool(2);
    const { id } = await lh.enqueue('again', {});
    const [first] = await lh.claim({ queue: 'again', owner: 'w' });
    expect(await lh.fail(first!, new Error('retry me'))).toBe('retry');
    const [second] = await lh.claim({ queue: 'again', owner: 'w' });
    expect(second?.jobId).toBe(id);
    expect(second?.claimId).not.toBe(first?.claimId);
    const { rows } = await pool.query<{ lease_claim_id: string }>(
      `SELECT lease_claim_id::text FROM "${lh.schema}".jobs WHERE id = $1`,
      [id],
    );
    expect(rows[0]?.lease_claim_id).toBe(second?.claimId);
  });

  it('refuses a lease whose token number was reissued by a later claim (as after a failover that lost the first claim)', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool(2);
    const { id } = await lh.enqueue('failover', {});
    const [lost] = await lh.claim({ queue: 'failover', owner: 'host:1', leaseMs: 60_000 });
    // The promoted replica never saw that claim: the row is back as it was before it, token included.
    await pool.query(
      `UPDATE "${lh.schema}".jobs
       SET status = 'pending', lease_token = lease_token - 1, attempt_count = attempt_count - 1,
           lease_owner = NULL, lease_expires_at = NULL, lease_claim_id = NULL
       WHERE id = $1`,
      [id],
    );
    // The same worker claims again on the new primary and is issued the very same token number.
    const [current] = await lh.claim({ queue: 'failover', owner: 'host:1', leaseMs: 60_000 });
    expect(current?.token).toBe(lost?.token);
    expect(current?.claimId).not.toBe(lost?.claimId);

    // The handler still running under the lost claim is fenced out on every write.
    expect(await lh.heartbeat(lost!)).toBe(false);
    expect(await lh.complete(lost!)).toBe(false);
    expect(await lh.fail(lost!, new Error('late'))).toBe('lost');
    expect((await lh.getJob(id))?.status).toBe('running');
    const refusals = await lh.leaseRefusals();
    expect(refusals.map((r) => [r.operation, r.count])).toEqual([
      ['complete', 1],
      ['fail', 1],
      ['heartbeat', 1],
    ]);
    // The current claim is unaffected.
    expect(await lh.complete(current!)).toBe(true);
    expect((await lh.getJob(id))?.status).toBe('succeeded');
  });

  it('checks the claim id in the effects ledger too', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const { id } = await lh.enqueue('effects', {});
    let attempts = 0;
    const worker = await started(
      lh.worker({
        queues: {
          effects: async (job) => {
            attempts += 1;
            // Forge this run's claim id on the row: the lease the handler holds no longer matches.
            await pool.query(
              `UPDATE "${lh.schema}".jobs SET lease_claim_id = lease_claim_id + 1 WHERE id = $1`,
              [job.id],
            );
            await job.effect('charge', { perform: async () => 'charged' });
          },
        },
      }),
    );
    try {
      await waitFor(async () => (await lh.leaseRefusals()).some((r) => r.operation === 'effect'), {
        what: 'a refused effect write',
      });
      const { rows } = await pool.query(`SELECT 1 FROM "${lh.schema}".job_effects WHERE job_id = $1`, [id]);
      expect(rows).toEqual([]);
      expect(attempts).toBe(1);
    } finally {
      await worker.stop();
    }
  });
});

describe('identifiers and tokens past 2^31 and 2^53', () => {
  const BEYOND_INT4 = 2n ** 31n - 3n;
  const BEYOND_DOUBLE = 2n ** 53n + 7n;

  for (const start of [BEYOND_INT4, BEYOND_DOUBLE]) {
    it(`runs the whole lifecycle with ids and tokens starting at ${start}`, async () => {
      const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
      const pool = testPool(2);
      const s = `"${lh.schema}"`;
      await pool.query(`ALTER TABLE ${s}.jobs ALTER COLUMN id RESTART WITH ${start}`);
      await pool.query(`ALTER TABLE ${s}.job_events ALTER COLUMN id RESTART WITH ${start}`);

      const { id } = await lh.enqueue('big', { n: 1 });
      expect(BigInt(id)).toBe(start);
      // Tokens are per-row counters: start this job's just below the boundary as well.
      await pool.query(`UPDATE ${s}.jobs SET lease_token = $2 WHERE id = $1`, [id, String(start)]);

      // Claim, heartbeat, fail with a retry, reclaim, lose the lease, recover, reclaim, complete.
      const [first] = await lh.claim({ queue: 'big', owner: 'w1' });
      expect(first?.jobId).toBe(id);
      expect(first?.token).toBe(String(start + 1n));
      expect(await lh.heartbeat(first!)).toBe(true);
      expect(await lh.fail(first!, new Error('transient'))).toBe('retry');
      const [second] = await lh.claim({ queue: 'big', owner: 'w1' });
      expect(second?.token).toBe(String(start + 2n));
      await expireLease(pool, lh.schema, id);
      expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
      expect(await lh.complete(second!)).toBe(false);
      const [third] = await lh.claim({ queue: 'big', owner: 'w2' });
      expect(third?.token).toBe(String(start + 3n));
      expect(await lh.complete(third!)).toBe(true);

      const job = await lh.getJob(id, { history: true });
      expect(job?.status).toBe('succeeded');
      expect(job?.attemptCount).toBe(3);
      const tokens = job?.history.map((event) => event.token).filter((token) => token !== null);
      expect(tokens).toContain(String(start + 1n));
      expect(tokens).toContain(String(start + 3n));

      // Dead and replayed, then processed by a worker: the same id all the way through.
      const { id: doomed } = await lh.enqueue('big', { n: 2 }, { maxAttempts: 1 });
      expect(BigInt(doomed)).toBe(start + 1n);
      const [last] = await lh.claim({ queue: 'big', owner: 'w1' });
      expect(await lh.fail(last!, new Error('fatal'))).toBe('dead');
      const replayed = await lh.replay([doomed], { reason: 'boundary test', actor: 'test' });
      expect(replayed.replayed).toBe(1);
      const seen: string[] = [];
      const worker = await started(lh.worker({ queues: { big: async (j) => void seen.push(j.id) } }));
      try {
        await waitFor(async () => (await lh.getJob(doomed))?.status === 'succeeded', {
          what: 'the replayed job',
        });
      } finally {
        await worker.stop();
      }
      expect(seen).toEqual([doomed]);
      expect(await countByStatus(pool, lh.schema)).toEqual({ succeeded: 2 });
    });
  }
});

describe('the in-doubt lookup across a reissued token', () => {
  it('does not answer "completed" for an old lease whose job a newer claim with the same token and owner completed', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const { id } = await lh.enqueue('in-doubt', {});
    const [lost] = await lh.claim({ queue: 'in-doubt', owner: 'host:1', leaseMs: 60_000 });
    // An asynchronous failover loses that claim: the row is back as it was, token included.
    await pool.query(
      `UPDATE "${lh.schema}".jobs
       SET status = 'pending', lease_token = lease_token - 1, attempt_count = attempt_count - 1,
           lease_owner = NULL, lease_expires_at = NULL, lease_claim_id = NULL
       WHERE id = $1`,
      [id],
    );
    const [current] = await lh.claim({ queue: 'in-doubt', owner: 'host:1', leaseMs: 60_000 });
    expect([current?.token, current?.claimId === lost?.claimId]).toEqual([lost?.token, false]);
    expect(await lh.complete(current!)).toBe(true);

    const { rows } = await pool.query<{ lease_claim_id: string }>(
      `SELECT lease_claim_id::text FROM "${lh.schema}".finished_jobs WHERE id = $1`,
      [id],
    );
    expect(rows).toEqual([{ lease_claim_id: current?.claimId }]);
    const ref = (lease: typeof lost) => ({
      jobId: lease!.jobId,
      token: lease!.token,
      claimId: lease!.claimId,
      owner: 'host:1',
      queue: 'in-doubt',
    });
    // The old holder whose completion's answer was lost asks whether it landed: it did not.
    expect(await findLandedOutcomes(lh.pool, lh.schema, [ref(lost)])).toEqual(new Map());
    // The claim that did complete is still answered.
    expect(await findLandedOutcomes(lh.pool, lh.schema, [ref(current)])).toEqual(
      new Map([[id, 'completed']]),
    );
  });

  it('tells a retried attempt of a reissued token from the old one by the claim id in its event', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const { id } = await lh.enqueue('in-doubt-fail', {});
    const [lost] = await lh.claim({ queue: 'in-doubt-fail', owner: 'host:1', leaseMs: 60_000 });
    await pool.query(
      `UPDATE "${lh.schema}".jobs
       SET status = 'pending', lease_token = lease_token - 1, attempt_count = attempt_count - 1,
           lease_owner = NULL, lease_expires_at = NULL, lease_claim_id = NULL
       WHERE id = $1`,
      [id],
    );
    const [current] = await lh.claim({ queue: 'in-doubt-fail', owner: 'host:1', leaseMs: 60_000 });
    expect(await lh.fail(current!, new Error('boom'))).toBe('retry');
    const ref = (lease: typeof lost) => ({
      jobId: lease!.jobId,
      token: lease!.token,
      claimId: lease!.claimId,
      owner: 'host:1',
      queue: 'in-doubt-fail',
    });
    expect(await findLandedOutcomes(lh.pool, lh.schema, [ref(lost)])).toEqual(new Map());
    expect(await findLandedOutcomes(lh.pool, lh.schema, [ref(current)])).toEqual(new Map([[id, 'retry']]));
  });
});
