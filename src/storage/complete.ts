import { defineStatement, type Queryable, run } from './db.js';
import { type FenceRef, fenceArrays, LEASE_FENCE, refusalCountingCte } from './refusals.js';

/**
 * JobCompleteMany: running -> succeeded, for a batch of leases in one statement.
 * Each row must still carry the presented owner and token with an unexpired lease (database time);
 * a row that does not is left untouched and counted as a lost-fence attempt. Looks rows up by
 * primary key; takes the row lock of each job it changes.
 */
const JobCompleteMany = defineStatement(
  'complete_jobs',
  (s) => `
  WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS t(id, token, owner, queue_name)
  ),
  changed AS (
    UPDATE ${s}.jobs AS j
    SET status = 'succeeded',
        finished_at = now(),
        lease_owner = NULL,
        lease_expires_at = NULL
    FROM input
    WHERE ${LEASE_FENCE}
    RETURNING j.id
  ),
  ${refusalCountingCte(s, 'complete')}
  SELECT id FROM changed`,
);

/** Completes the leases it can; returns the ids whose completion was accepted. */
export async function completeJobs(
  db: Queryable,
  schema: string,
  refs: readonly FenceRef[],
): Promise<Set<string>> {
  if (refs.length === 0) return new Set();
  const rows = await run<{ id: string }>(db, JobCompleteMany(schema), fenceArrays(refs));
  return new Set(rows.map((row) => row.id));
}
