/**
 * The SET list of every write that moves a live job to `cancelled` (lh.cancel, the dashboard's bulk
 * cancel, dedupe's replace of a running job): the token is bumped, so the worker that held the
 * lease is fenced out of every later write; the lease is cleared and the reason kept as the last
 * error. `message` is an SQL expression. One copy, so the three transitions cannot drift apart.
 */
export function cancelledSet(message: string): string {
  return `SET status = 'cancelled',
        lease_token = j.lease_token + 1,
        lease_owner = NULL,
        lease_expires_at = NULL,
        finished_at = now(),
        last_error_code = 'CANCELLED',
        last_error_class = NULL,
        last_error_message = ${message},
        last_error_stack = NULL,
        awaits_predecessor = false`;
}
