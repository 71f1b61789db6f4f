import { defineStatement, type Queryable, run } from '../db.js';
import {
  byQueue,
  FENCE_INPUT_ARRAYS,
  FENCE_INPUT_COLUMNS,
  type FenceRef,
  fenceArrays,
  fencedCte,
  leaseKey,
} from '../fence.js';
import { refusalCountingCte } from '../refusals.js';

/**
 * JobExtendLeaseMany: running -> running with a later lease_expires_at, for a batch in one statement.
 * Fenced like a completion: an expired, recovered or reclaimed lease is not revived, and the
 * attempt is counted (and recorded as a `refused` event). The new expiry is measured from database
 * time. Extensions are counted on the row (lease_extensions), not logged: the record that ends the
 * attempt copies the count. Looks rows up by primary key; takes the row lock of each job it extends.
 * A `job.progress(detail)` rides here ($7, JSON texts, null where a job reported none; the whole
 * array null when none did): the latest detail is stored in the same fenced write, never in a
 * statement of its own, and a lease that is gone stores none.
 * A batch is of one queue ($8), named by the fence's probe and the update, so that a layout split by
 * queue answers it from that queue's part (docs/scaling.md); `extendLeases` sends one per queue.
 */
export const JobExtendLeaseMany = defineStatement(
  'extend_leases',
  (s) => `
  WITH input AS (
    SELECT *
    FROM unnest(${FENCE_INPUT_ARRAYS}, $6::double precision[], $7::text[])
      AS t(${FENCE_INPUT_COLUMNS}, lease_ms, progress)
  ),
  ${fencedCte(s, false, '$8')},
  changed AS (
    UPDATE ${s}.jobs AS j
    SET lease_expires_at = now() + input.lease_ms * interval '1 millisecond',
        lease_extensions = j.lease_extensions + 1,
        progress = coalesce(input.progress::jsonb, j.progress)
    FROM fenced AS input -- the fenced rows, with the columns of their input
    WHERE j.id = input.id AND j.queue_name = $8::text
    RETURNING j.id, j.lease_expires_at, j.lease_token, j.lease_claim_id
  ),
  ${refusalCountingCte(s, 'heartbeat', '$8')}
  SELECT id, lease_expires_at, lease_token, lease_claim_id FROM changed`,
);

/** A lease to extend by `leaseMs` from now, with a progress detail to store (JSON text) if any. */
export interface ExtendRef extends FenceRef {
  leaseMs: number;
  progress?: string | null;
}

/**
 * Extends the leases it can; returns the new expiry of each one extended, by `leaseKey` (not by job
 * id: a process may hold two claims of one job, the stale one's handler still running, and only
 * the live one is extended).
 */
export async function extendLeases(
  db: Queryable,
  schema: string,
  refs: readonly ExtendRef[],
): Promise<Map<string, Date>> {
  const extended = new Map<string, Date>();
  for (const group of byQueue(refs)) {
    for (const [key, expiry] of await extendQueueLeases(db, schema, group)) extended.set(key, expiry);
  }
  return extended;
}

/** Extends the leases of one queue in one statement. */
async function extendQueueLeases(
  db: Queryable,
  schema: string,
  refs: readonly ExtendRef[],
): Promise<Map<string, Date>> {
  const rows = await run<{ id: string; lease_expires_at: Date; lease_token: string; lease_claim_id: string }>(
    db,
    JobExtendLeaseMany(schema),
    [
      ...fenceArrays(refs),
      refs.map((ref) => ref.leaseMs),
      refs.some((ref) => ref.progress != null) ? refs.map((ref) => ref.progress ?? null) : null,
      refs[0]?.queue ?? null,
    ],
  );
  return new Map(
    rows.map((row) => [
      leaseKey({ jobId: row.id, token: row.lease_token, claimId: row.lease_claim_id }),
      row.lease_expires_at,
    ]),
  );
}
