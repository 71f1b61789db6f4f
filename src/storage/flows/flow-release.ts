/**
 * The parts of the finishing statements that move a flow on (see migration 014): a parent's
 * accepted completion releases its children, and a parent that dies (or is cancelled) applies
 * each child's `onParentDead` policy. They also wake a job waiting in `job.invoke` (migration 026:
 * an edge of no flow, from the invoked job to it), on success and, as the policy 'run', on death.
 * (The invoke edge is told by its NULL flow_id, a column every schema since 014 has: these
 * fragments run in every failure, and a process of this version may meet a schema before 026.) Both ride in the statement that finishes the parent, filtered
 * on the parent row's `has_children` flag, so a plain job's completion or failure touches no flow
 * table (the lookups run with an empty id array: one index probe that finds nothing).
 */

/**
 * Why the children's lookup is gated on an edge existing: an uncorrelated EXISTS is evaluated once,
 * before the lookup, and a batch with no flow parent (every plain batch) then never starts the
 * lookup. Without it, the empty id list still started an index scan of every part of jobs, which in
 * a layout split by queue (docs/scaling.md) is every queue's part.
 */
const NO_EDGES_NO_PROBE = 'no flow edge: the lookup never starts';

/**
 * Releases job.invoke's waiting jobs (026) over the edges of no flow in `edges` (a CTE with
 * `child_id`, `invoked`, and `child_queue` when `routed`), the rows locked by `flow_locked`; the
 * flows' release above takes the other edges. Such a job raises its own count while it still
 * runs and hands itself back after, so the job it invoked may end in between: it is released
 * running or pending. Its status is checked here, on the row locked (not as the statement's
 * snapshot saw it): a hand-back that committed while this statement waited for the row is seen,
 * so the release is not lost between the two. A flow's child always waits pending, so the flows'
 * release keeps its own condition and index (jobs_flow_waiting_idx); a batch with no invoke edge
 * never starts this update (the EXISTS is evaluated once, before it).
 */
function invokerRelease(s: string, name: string, edges: string, routed: boolean): string {
  const queue = routed ? 'child_queue, ' : '';
  return `${name} AS (
    UPDATE ${s}.jobs AS c
    SET waiting_parents = greatest(0, c.waiting_parents - e.n)
    FROM (SELECT ${queue}child_id, count(*)::int AS n FROM ${edges} WHERE invoked GROUP BY ${queue}child_id) AS e
    JOIN flow_locked AS l ON l.id = e.child_id
    WHERE ${routed ? 'c.queue_name = l.queue_name AND ' : ''}c.id = l.id
      AND c.status IN ('pending', 'running') AND c.waiting_parents > 0
      AND EXISTS (SELECT FROM ${edges} WHERE invoked) -- no invoke edge: the update never starts
    RETURNING c.id, c.queue_name, c.waiting_parents
  )`;
}

/**
 * Releases the children of the finished jobs in `source` (a CTE with `id` and `has_children`, holding
 * only rows whose transition was accepted: the fenced `changed` of a completion): every unresolved
 * edge out of them is marked resolved, and each child's `waiting_parents` drops by the number of its
 * edges resolved here. A child reaching 0 is claimable from this statement's commit. Children are
 * locked in id order (two completions sharing children wait for each other, never deadlock); a child
 * no longer pending (cancelled) is left alone. Defines `flow_edges`, `flow_locked`, `flow_released`
 * (children changed, with their new count). One statement for the whole batch, whatever the fan-out.
 *
 * `routed` (a schema at 019): each child is looked up by its queue and id, the queue taken from its
 * edge (`child_queue`), so in a layout split by queue (docs/scaling.md) the release reaches the
 * parts of its children's queues only (each child's probe is pruned to its queue when it runs). An
 * edge without a queue (written by an older version during a rolling upgrade) has it looked up by
 * id: the coalesce runs that lookup only for such an edge. Unrouted (a schema before 019, see
 * runLaneRouted): by id, as 014 wrote it.
 */
export function flowReleaseCte(s: string, source: string, routed = true): string {
  // Routed: the lock is one probe per child, in its queue (a lateral probe, as the fence's: a join
  // planned as a whole hashed every queue's part of jobs in the check), and the update takes both
  // keys of its probe from the locked rows. No edge, no probe.
  if (routed) {
    return `flow_edges AS (
    UPDATE ${s}.job_dependencies AS d
    SET resolved = true
    WHERE d.parent_id = ANY (ARRAY(SELECT id FROM ${source} WHERE has_children)) AND NOT d.resolved
    RETURNING d.child_id, d.flow_id IS NULL AS invoked,
              coalesce(d.child_queue, (SELECT q.queue_name FROM ${s}.jobs AS q WHERE q.id = d.child_id)) AS child_queue
  ),
  flow_locked AS (
    SELECT l.id, e.child_queue AS queue_name
    FROM (SELECT DISTINCT child_queue, child_id FROM flow_edges ORDER BY child_id OFFSET 0) AS e
    CROSS JOIN LATERAL (
      SELECT c.id FROM ${s}.jobs AS c
      WHERE c.queue_name = e.child_queue AND c.id = e.child_id
      FOR UPDATE OF c
    ) AS l
  ),
  flow_released AS (
    UPDATE ${s}.jobs AS c
    SET waiting_parents = greatest(0, c.waiting_parents - e.n)
    FROM (SELECT child_queue, child_id, count(*)::int AS n FROM flow_edges WHERE NOT invoked
          GROUP BY child_queue, child_id) AS e
    JOIN flow_locked AS l ON l.id = e.child_id
    WHERE c.queue_name = l.queue_name AND c.id = l.id
      AND c.status = 'pending' AND c.waiting_parents > 0
    RETURNING c.id, c.queue_name, c.waiting_parents
  ),
  ${invokerRelease(s, 'flow_invokers', 'flow_edges', true)}`;
  }
  return `flow_edges AS (
    UPDATE ${s}.job_dependencies AS d
    SET resolved = true
    WHERE d.parent_id = ANY (ARRAY(SELECT id FROM ${source} WHERE has_children)) AND NOT d.resolved
    RETURNING d.child_id, d.flow_id IS NULL AS invoked
  ),
  flow_locked AS (
    SELECT c.id FROM ${s}.jobs AS c
    WHERE c.id = ANY (ARRAY(SELECT child_id FROM flow_edges))
      AND EXISTS (SELECT FROM flow_edges) -- ${NO_EDGES_NO_PROBE}
    ORDER BY c.id
    FOR UPDATE OF c
  ),
  flow_released AS (
    UPDATE ${s}.jobs AS c
    SET waiting_parents = greatest(0, c.waiting_parents - e.n)
    FROM (SELECT child_id, count(*)::int AS n FROM flow_edges WHERE NOT invoked GROUP BY child_id) AS e
    JOIN flow_locked AS l ON l.id = e.child_id
    WHERE c.id = e.child_id AND c.status = 'pending' AND c.waiting_parents > 0
    RETURNING c.id, c.queue_name, c.waiting_parents
  ),
  ${invokerRelease(s, 'flow_invokers', 'flow_edges', false)}`;
}

/** SQL expression: wakes each queue that got a child (or an invoking job) released (notifications fold per transaction). */
export function flowWakeups(channel: string): string {
  return `(SELECT count(pg_notify(${channel}, r.queue_name))
     FROM (SELECT queue_name FROM flow_released WHERE waiting_parents = 0
           UNION SELECT queue_name FROM flow_invokers WHERE waiting_parents = 0) AS r)`;
}

/**
 * Applies `onParentDead` for the jobs in `source` (a CTE with `id` and `has_children`) that meet
 * `condition` (they must be exactly the jobs this statement made dead or cancelled): over every unresolved edge out of them,
 * - 'run': the edge is resolved and the child's count drops, as a success would (the child runs and
 *   job.parents() shows the dead parent);
 * - 'cancel': the child and every descendant of it still pending are cancelled (error code
 *   PARENT_DEAD, a `cancelled` event whose detail names the parent whose death caused it);
 * - 'block': nothing; the child waits (getFlow shows it blocked) until the parent is replayed and
 *   succeeds, or an operator cancels it.
 * A descendant reached by the cancel cascade is cancelled even when it also has a 'run' edge from a
 * dying parent (the cascade wins; it is not decremented as well). Needs WITH RECURSIVE on the
 * statement. Defines `flow_dead_*` CTEs and `flow_released` (as flowReleaseCte, for flowWakeups).
 */
export function flowParentDeadCtes(s: string, source: string, condition = 'true'): string {
  return `flow_dead_edges AS (
    SELECT d.parent_id, d.child_id, d.flow_id IS NULL AS invoked,
           CASE WHEN d.flow_id IS NULL THEN 'run' ELSE n.on_parent_dead END AS on_parent_dead
    FROM ${s}.job_dependencies AS d
    -- Left: the job that invoked a dying job (an edge of no flow, 026) may be in no flow itself.
    LEFT JOIN ${s}.flow_nodes AS n ON n.job_id = d.child_id AND d.flow_id IS NOT NULL
    WHERE d.parent_id = ANY (ARRAY(SELECT id FROM ${source} WHERE has_children AND ${condition}))
      AND NOT d.resolved
  ),
  flow_doomed_paths (id, cause) AS (
    SELECT child_id, parent_id FROM flow_dead_edges WHERE on_parent_dead = 'cancel'
    UNION
    SELECT d.child_id, p.cause
    FROM flow_doomed_paths AS p
    JOIN ${s}.job_dependencies AS d ON d.parent_id = p.id AND d.flow_id IS NOT NULL
  ),
  flow_doomed AS (
    SELECT DISTINCT ON (id) id, cause FROM flow_doomed_paths ORDER BY id, cause
  ),
  flow_run_edges AS (
    UPDATE ${s}.job_dependencies AS d
    SET resolved = true
    FROM flow_dead_edges AS e
    WHERE d.parent_id = e.parent_id AND d.child_id = e.child_id AND e.on_parent_dead = 'run'
      AND d.child_id NOT IN (SELECT id FROM flow_doomed)
    RETURNING d.child_id, e.invoked
  ),
  flow_locked AS (
    SELECT c.id FROM ${s}.jobs AS c
    WHERE c.id = ANY (ARRAY(SELECT child_id FROM flow_run_edges UNION SELECT id FROM flow_doomed))
      AND EXISTS (SELECT FROM flow_dead_edges) -- ${NO_EDGES_NO_PROBE}
    ORDER BY c.id
    FOR UPDATE OF c
  ),
  flow_released AS (
    UPDATE ${s}.jobs AS c
    SET waiting_parents = greatest(0, c.waiting_parents - e.n)
    FROM (SELECT child_id, count(*)::int AS n FROM flow_run_edges WHERE NOT invoked GROUP BY child_id) AS e
    JOIN flow_locked AS l ON l.id = e.child_id
    WHERE c.id = e.child_id AND c.status = 'pending' AND c.waiting_parents > 0
    RETURNING c.id, c.queue_name, c.waiting_parents
  ),
  ${invokerRelease(s, 'flow_invokers', 'flow_run_edges', false)},
  flow_cancelled AS (
    UPDATE ${s}.jobs AS c
    SET status = 'cancelled',
        finished_at = now(),
        last_error_code = 'PARENT_DEAD',
        last_error_class = NULL,
        last_error_message = 'cancelled because parent job ' || x.cause || ' of its flow ended without success',
        last_error_stack = NULL
    FROM flow_doomed AS x
    JOIN flow_locked AS l ON l.id = x.id
    WHERE c.id = x.id AND c.status = 'pending'
    RETURNING c.id, c.queue_name, x.cause
  ),
  flow_cancel_recorded AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, status_after, error_code, reason, detail)
    SELECT id, queue_name, 'cancelled', 'cancelled', 'PARENT_DEAD',
           'parent job ' || cause || ' ended without success',
           jsonb_build_object('parentId', cause::text)
    FROM flow_cancelled
  )`;
}
