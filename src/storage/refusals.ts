/**
 * Lost-fence accounting, shared by every fenced transition.
 *
 * A fenced statement reads its batch from a CTE named `input` (with `id` and `queue_name` columns)
 * and reports the rows it changed from a CTE named `changed`. This fragment counts the rest —
 * the writes presented with a lease that was no longer current — into `lease_refusals`, in the
 * same statement, so counting costs no extra round trip. When nothing is refused it inserts nothing.
 */
export type FencedOperation = 'heartbeat' | 'complete' | 'fail' | 'snooze';

/** SQL text of the `refused` CTE for `operation`; `s` is the quoted schema. */
export function refusalCountingCte(s: string, operation: FencedOperation): string {
  return `refused AS (
    INSERT INTO ${s}.lease_refusals AS r (queue_name, operation, refused_count, last_refused_at)
    SELECT input.queue_name, '${operation}', count(*), now()
    FROM input
    WHERE input.id NOT IN (SELECT id FROM changed)
    GROUP BY input.queue_name
    ON CONFLICT (queue_name, operation) DO UPDATE
      SET refused_count = r.refused_count + excluded.refused_count,
          last_refused_at = excluded.last_refused_at
  )`;
}

/** The fence every lease-holding write must pass: same claim, same owner, lease not yet lapsed. */
export const LEASE_FENCE = `j.id = input.id
    AND j.status = 'running'
    AND j.lease_owner = input.owner
    AND j.lease_token = input.token
    AND j.lease_expires_at > now()`;

/** A lease reference as the fenced statements take it. */
export interface FenceRef {
  jobId: string;
  token: string;
  owner: string;
  queue: string;
}

/** Splits lease references into four parallel arrays: ids, tokens, owners, queues ($1..$4 of a fenced statement). */
export function fenceArrays(refs: readonly FenceRef[]): [string[], string[], string[], string[]] {
  const ids: string[] = [];
  const tokens: string[] = [];
  const owners: string[] = [];
  const queues: string[] = [];
  for (const ref of refs) {
    ids.push(ref.jobId);
    tokens.push(ref.token);
    owners.push(ref.owner);
    queues.push(ref.queue);
  }
  return [ids, tokens, owners, queues];
}
