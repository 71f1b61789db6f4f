/**
 * Lost-fence accounting, shared by every fenced transition.
 *
 * A fenced statement reads its batch from a CTE named `input` (with `id`, `token`, `owner` and
 * `queue_name` columns) and reports the rows it accepted from a CTE named `changed` (or the one
 * named by `accepted`: the plain completion's `fenced`, which may leave a job for another statement). This fragment
 * handles the rest — the writes presented with a lease that was no longer current — in the same
 * statement, so it costs no extra round trip: it counts them per queue and operation in
 * `lease_refusals`, and records one `refused` event per write (who, which token) in `job_events`.
 * When nothing is refused it inserts nothing.
 * `queueParam` names the statement's one queue when it has one (a batch grouped by queue, see
 * `byQueue`): the inserts then write that parameter, not the batch rows' copy of it, so a planner
 * that routes by what it can prove (Citus, docs/scaling.md) sees one queue in every write.
 */
export type FencedOperation = 'heartbeat' | 'complete' | 'fail' | 'snooze' | 'effect' | 'step';

/** SQL text of the `refused_rows`, `refused` and `refused_events` CTEs for `operation`; `s` is the quoted schema. */
export function refusalCountingCte(
  s: string,
  operation: FencedOperation,
  queueParam?: string,
  accepted = 'changed',
): string {
  const queue = queueParam === undefined ? 'queue_name' : `${queueParam}::text`;
  // With one queue, no GROUP BY: HAVING keeps the no-refusal case an insert of nothing.
  const perQueue = queueParam === undefined ? 'GROUP BY queue_name' : 'HAVING count(*) > 0';
  return `refused_rows AS (
    SELECT input.id, input.token, input.claim_id, input.owner, input.queue_name
    FROM input
    WHERE input.id NOT IN (SELECT id FROM ${accepted})
  ),
  refused AS (
    INSERT INTO ${s}.lease_refusals AS r (queue_name, operation, refused_count, last_refused_at)
    SELECT ${queue}, '${operation}', count(*), now()
    FROM refused_rows
    ${perQueue}
    ON CONFLICT (queue_name, operation) DO UPDATE
      SET refused_count = r.refused_count + excluded.refused_count,
          last_refused_at = excluded.last_refused_at
  ),
  refused_events AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, lease_owner, lease_token, lease_claim_id, detail)
    SELECT id, ${queue}, 'refused', owner, token, claim_id, '{"operation":"${operation}"}'::jsonb
    FROM refused_rows
  )`;
}
