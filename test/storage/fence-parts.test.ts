import { describe, expect, it } from 'vitest';
import type { Lease, Leasehold } from '../../src/index.js';
import { beginEffect } from '../../src/storage/flows/effects.js';
import { completeJobs } from '../../src/storage/leases/complete.js';
import { snoozeJobs } from '../../src/storage/leases/fail.js';
import { migratedClient, testPool } from '../support/db.js';

// Each part of the fence on its own. The claim id and the token both change at every claim, so a
// test that reclaims a job changes both and would pass with either part missing from the fence.
// Here one column moves and everything else (owner, the other part, an unexpired lease) stays, as
// after a failover that reissued a token number (the claim id alone then tells the claims apart)
// or a claim id collision (the token alone does).

type Operation = 'heartbeat' | 'complete' | 'complete-plain' | 'fail' | 'snooze' | 'effect';
const operations: Operation[] = ['heartbeat', 'complete', 'complete-plain', 'fail', 'snooze', 'effect'];

async function attempt(lh: Leasehold, op: Operation, lease: Lease): Promise<boolean> {
  if (op === 'heartbeat') return lh.heartbeat(lease);
  if (op === 'complete') return lh.complete(lease);
  // The worker's completion of a plain batch (no ordering, key-slot or flow step): the same fence.
  if (op === 'complete-plain') {
    return (await completeJobs(lh.pool, lh.schema, [{ ...lease, plain: true }])).has(lease.jobId);
  }
  if (op === 'fail') return (await lh.fail(lease, new Error('no'), { retryable: true })) !== 'lost';
  // The effects ledger's own fence (storage/effects.ts): an intent recorded only under the lease.
  if (op === 'effect') return (await beginEffect(lh.pool, lh.schema, lease, 'charge', 'key-1')).held;
  const accepted = await snoozeJobs(lh.pool, lh.schema, [{ ...lease, delayMs: 1000 }]);
  return accepted.has(lease.jobId);
}

const ROW = `SELECT status::text, lease_owner, lease_token::text, lease_claim_id::text, attempt_count, lease_expires_at::text AS expires,
                    lease_expires_at > now() AS live
             FROM %s.jobs WHERE id = $1`;

// How each part moves: the token and the claim id to the next number, the owner to another name,
// the status to dead.
const parts = [
  { column: 'lease_token', moved: 'lease_token + 1' },
  { column: 'lease_claim_id', moved: 'lease_claim_id + 1' },
  { column: 'lease_owner', moved: "'another-worker'" },
  // Every transition out of `running` also clears the lease columns today; the fence must not
  // depend on that: a job no longer running refuses its old lease even with the columns left.
  { column: 'status', moved: "'dead'" },
] as const;

describe.each(parts)('the fence on $column alone', ({ column, moved }) => {
  it.each(operations)(`refuses %s when only ${column} moved, and changes nothing`, async (op) => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool(2);
    const rowOf = async (id: string) =>
      (await pool.query(ROW.replace('%s', `"${lh.schema}"`), [id])).rows[0] as Record<string, unknown>;

    // Control: the same write with the current lease is accepted.
    await lh.enqueue('parts', { control: true });
    const [control] = await lh.claim({ queue: 'parts', owner: 'w', leaseMs: 60_000 });
    expect(await attempt(lh, op, control!)).toBe(true);

    await lh.enqueue('parts', {});
    const [lease] = await lh.claim({ queue: 'parts', owner: 'w', leaseMs: 60_000 });
    await pool.query(`UPDATE "${lh.schema}".jobs SET ${column} = ${moved} WHERE id = $1`, [lease!.jobId]);
    const before = await rowOf(lease!.jobId);
    expect(before).toMatchObject({ live: true });

    expect(await attempt(lh, op, lease!)).toBe(false);
    expect(await rowOf(lease!.jobId)).toEqual(before);
    const { rows } = await pool.query(
      `SELECT (SELECT count(*) FROM "${lh.schema}".finished_jobs WHERE id = $1)
            + (SELECT count(*) FROM "${lh.schema}".job_effects WHERE job_id = $1) AS n`,
      [lease!.jobId],
    );
    expect(Number(rows[0].n)).toBe(0);
  });
});
