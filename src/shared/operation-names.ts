/*
 * Which public call an internal statement serves: what a database error's message names (issue 38),
 * so that "enqueue failed: ..." reaches the user, never "leasehold_enqueue_one_3ab6a29fdd failed".
 */

/** Named statements read "leasehold_<label>_<digest>". */
export const STATEMENT_NAME = /^leasehold_(.+)_[0-9a-f]{10}$/;

// The public call each internal statement serves, by the start of its label: what an error's
// message names when it reaches a worker's `error` event rather than a client call (which names
// its own method, see `inOperation`). First match wins.
const OPERATION_OF_LABEL: readonly (readonly [RegExp, string])[] = [
  [/^(enqueue|wakeup_notify|attach_traceparent)/, 'enqueue'],
  [/^(claim|queue_claim_settings|list_pending|read_traceparents)/, 'claim'],
  [/^(complete|find_landed_outcomes|record_refusal)/, 'complete'],
  [/^fail/, 'fail'],
  [/^snooze/, 'snooze'],
  [/^(extend_leases|transaction_timeouts)/, 'heartbeat'],
  [/^(get_job|job_attempt_facts|list_job_events|read_jobs_tuples|read_job_parents|job_effect)/, 'getJob'],
  [/^effect_/, 'job.effect'],
  [/^(recover_expired|lease_next_expiry|lease_lapse_probe)/, 'recoverExpired'],
  [/^(prune|metrics_rollup_prune|schedule_tick_prune|record_finished_queues)/, 'prune'],
  [/^(queue_known|list_known_queue_names)/, 'queue lookup'],
  [/^forget_queue/, 'forgetQueue'],
  [/^(move_job_lane_rows|truncate_job_lanes)/, 'rotateLanes'],
  [/^(fairness_pass_probe|age_pending_jobs)/, 'aging pass'],
  [/^repair_/, 'ordering-key repair'],
  [/^(schedule_fire|job_schedule_tick)/, 'runSchedules'],
  [/^schedule_/, 'schedule'],
  [/^replay/, 'replay'],
  [/^(cancel|remove_listed)/, 'cancel'],
  [/^(list_dead|count_dead)/, 'listDead'],
  [/^(list_queues|configure_queue|queue_pause)/, 'queue settings'],
  [/^(read_|rate_limit_stats|stats_|metrics_rollup)/, 'stats'],
  [/^(list_blocked_keys|skip_job)/, 'ordering keys'],
  [/^(enqueue_flow|read_flow_nodes|list_blocked_flows|prune_flows)/, 'flows'],
  [/^(queue_payload_search|bulk_action)/, 'search'],
  [/^(list_refusals|operator_action_list)/, 'history'],
  [/^(read_waited_jobs|mark_waited_jobs)/, 'waitFor'],
  [/^maintenance_lock/, 'maintenance'],
];

/** The public call an internal statement serves (`leasehold_enqueue_one_3ab6a29fdd` gives `enqueue`). */
export function operationOf(statement: string): string {
  const label = STATEMENT_NAME.exec(statement)?.[1];
  for (const [pattern, operation] of OPERATION_OF_LABEL)
    if (pattern.test(label ?? statement)) return operation;
  // Not a statement's name: already an operation's (`migrate`, `start`).
  return label === undefined ? statement : 'a database call';
}
