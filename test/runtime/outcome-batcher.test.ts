import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/index.js';
import { OutcomeBatcher } from '../../src/runtime/outcome-batcher.js';
import { leaseKey } from '../../src/storage/fence.js';
import { extendLeases } from '../../src/storage/leases/heartbeat.js';
import { expireLease, migratedClient, testPool } from '../support/db.js';

// A worker process can hold two claims of one job: its handler outlived the lease (a pause, a slow
// event loop), the sweep returned the job, and the same process claimed it again. Both handlers
// may then finish within one flush of the worker's batched writes.
async function twoClaimsOfOneJob() {
  const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
  const pool = testPool();
  const { id } = await lh.enqueue('twice', {});
  const [stale] = await lh.claim({ queue: 'twice', owner: 'one-process' });
  await expireLease(pool, lh.schema, id);
  expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
  const [live] = await lh.claim({ queue: 'twice', owner: 'one-process' });
  if (!stale || !live) throw new Error('the job was not claimed twice');
  expect(live.jobId).toBe(stale.jobId);
  return { lh, pool, id, stale, live };
}

describe('the worker’s batched writes', () => {
  it('answer each claim of one job for itself: the stale completion is lost, the live one completed', async () => {
    const { lh, pool, id, stale, live } = await twoClaimsOfOneJob();
    const errors: unknown[] = [];
    const batcher = new OutcomeBatcher(lh.pool, lh.schema, 0, (err) => errors.push(err));
    // Queued in the same tick: without one write per job and flush, both rode one statement that
    // answered by job id, and the stale claim was told `completed` too.
    const answers = await Promise.all([batcher.complete(stale), batcher.complete(live)]);
    expect(answers).toEqual(['lost', 'completed']);
    expect(errors).toEqual([]);
    const { rows } = await pool.query(
      `SELECT lease_token::text AS token FROM "${lh.schema}".finished_jobs WHERE id = $1`,
      [id],
    );
    expect(rows).toEqual([{ token: live.token }]);
  });

  it('tell a live failure its own outcome beside a stale completion of the same job', async () => {
    const { lh, stale, live } = await twoClaimsOfOneJob();
    const batcher = new OutcomeBatcher(lh.pool, lh.schema, 0, () => {});
    const [completed, failed] = await Promise.all([
      batcher.complete(stale),
      batcher.fail({
        ...live,
        retryable: true,
        delayMs: 0,
        baseMs: 0,
        maxMs: 0,
        attemptBudget: null,
        errorCode: 'BOOM',
        errorClass: 'Error',
        errorMessage: 'boom',
        errorStack: null,
      }),
    ]);
    expect(completed).toBe('lost');
    expect(failed).toBe('retry');
    expect((await lh.getJob(live.jobId))?.status).toBe('pending');
  });

  it('renew only the live claim when the lease keeper sends both in one heartbeat', async () => {
    const { lh, stale, live } = await twoClaimsOfOneJob();
    // The keeper reads each job's new expiry from this map: keyed by job id, the stale claim was
    // handed the live one's renewal and its handler ran on, unaborted, past its lost lease.
    const extended = await extendLeases(lh.pool, lh.schema, [
      { ...stale, leaseMs: 30_000 },
      { ...live, leaseMs: 30_000 },
    ]);
    expect([...extended.keys()]).toEqual([leaseKey(live)]);
    expect(extended.has(leaseKey(stale))).toBe(false);
  });

  it('lh.completeMany refuses two claims of one job in one call, writing nothing', async () => {
    const { lh, stale, live } = await twoClaimsOfOneJob();
    const refused = lh.completeMany([stale, live]);
    await expect(refused).rejects.toBeInstanceOf(ValidationError);
    await expect(refused).rejects.toThrow(/two claims of job/);
    expect(await lh.getJob(live.jobId)).toMatchObject({ status: 'running', leaseToken: live.token });
    expect(await lh.completeMany([live])).toEqual(new Set([live.jobId]));
  });
});
