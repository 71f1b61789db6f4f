import { defineStatement, type Queryable, run } from '../db.js';

/**
 * A CTE `finished_names`: the distinct queue names of finished_jobs, one index probe each
 * (finished_jobs_queue_idx, a loose index scan), ending with a NULL row. The listings and stats read
 * it so that a queue whose jobs all succeeded is still known.
 */
export function finishedQueueNamesCte(s: string): string {
  return `finished_names AS (
    (SELECT queue_name FROM ${s}.finished_jobs ORDER BY queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT f.queue_name FROM ${s}.finished_jobs AS f WHERE f.queue_name > p.queue_name
            ORDER BY f.queue_name LIMIT 1)
    FROM finished_names AS p
    WHERE p.queue_name IS NOT NULL
  )`;
}

/*
 * Known queues (issue 38). A queue is known once a job was enqueued to it, it was configured, or a
 * schedule names it. The record costs the enqueue nothing: no statement, trigger or column is added
 * to the hot path. A queue with work or kept jobs is found where they are (one index probe per
 * table); a configured queue has its queues row; and the retention pass records the queues of the
 * jobs it is about to remove (recordKnownQueues) before it removes them, so that a queue outlives
 * its last job as a row of queues, listed with zeros until an operator forgets it.
 */

// A loose index scan: the distinct queue names of `table`'s rows matching `where` (an index leading
// with queue_name serves it), one probe per name, in name order.
function distinctNames(name: string, table: string, where: string): string {
  return `${name} AS (
    (SELECT queue_name FROM ${table} WHERE ${where} ORDER BY queue_name LIMIT 1)
    UNION ALL
    SELECT (SELECT x.queue_name FROM ${table} AS x
            WHERE ${where.replace(/\b(status|awaits_predecessor|waiting_parents|finished_at)\b/g, 'x.$1')}
              AND x.queue_name > p.queue_name
            ORDER BY x.queue_name LIMIT 1)
    FROM ${name} AS p
    WHERE p.queue_name IS NOT NULL
  )`;
}

/** The loose scans of the job tables' queue-led indexes, as CTEs of a `WITH RECURSIVE`. */
function jobQueueNameScans(s: string): string {
  return [
    distinctNames(
      'pending_names',
      `${s}.jobs`,
      "status = 'pending' AND NOT awaits_predecessor AND waiting_parents = 0",
    ),
    distinctNames('terminal_names', `${s}.jobs`, 'finished_at IS NOT NULL'),
    distinctNames('finished_names', `${s}.finished_jobs`, 'true'),
  ].join(',\n');
}

/**
 * QueueKnownRead: whether `$1` names a known queue: its queues row, a schedule naming it, or a job
 * in any state, each an index probe (queues and schedules by key; jobs_claimable_idx,
 * jobs_terminal_queue_idx, jobs_flow_waiting_idx, jobs_ordering_waiting_idx, finished_jobs_queue_idx;
 * running jobs through jobs_expired_lease_idx, as many as the workers' slots). Read-only, no locks.
 */
const QueueKnownRead = defineStatement(
  'queue_known',
  (s) => `
  SELECT EXISTS (SELECT 1 FROM ${s}.queues WHERE name = $1)
      OR EXISTS (SELECT 1 FROM ${s}.schedules WHERE queue_name = $1)
      OR EXISTS (SELECT 1 FROM ${s}.jobs WHERE queue_name = $1 AND status = 'pending'
                   AND NOT awaits_predecessor AND waiting_parents = 0)
      OR EXISTS (SELECT 1 FROM ${s}.jobs WHERE queue_name = $1 AND finished_at IS NOT NULL)
      OR EXISTS (SELECT 1 FROM ${s}.jobs WHERE queue_name = $1 AND status = 'pending' AND waiting_parents > 0)
      OR EXISTS (SELECT 1 FROM ${s}.jobs WHERE queue_name = $1 AND awaits_predecessor)
      OR EXISTS (SELECT 1 FROM ${s}.jobs WHERE status = 'running' AND queue_name = $1)
      OR EXISTS (SELECT 1 FROM ${s}.finished_jobs WHERE queue_name = $1) AS known`,
);

/** True when `queue` is known (see the note at the top of this file). */
export async function isKnownQueue(db: Queryable, schema: string, queue: string): Promise<boolean> {
  const rows = await run<{ known: boolean }>(db, QueueKnownRead(schema), [queue]);
  return rows[0]?.known === true;
}

/**
 * KnownQueueNameList: the names of known queues, by name, at most $1: the queues rows, the
 * schedules' queues, and the loose scans of the job tables (one probe per name). Read-only; read
 * only when a name was not found, to suggest the closest.
 */
const KnownQueueNameList = defineStatement(
  'list_known_queue_names',
  (s) => `
  WITH RECURSIVE ${jobQueueNameScans(s)}
  SELECT name FROM (
    SELECT name FROM ${s}.queues
    UNION SELECT queue_name FROM ${s}.schedules
    UNION SELECT queue_name FROM pending_names WHERE queue_name IS NOT NULL
    UNION SELECT queue_name FROM terminal_names WHERE queue_name IS NOT NULL
    UNION SELECT queue_name FROM finished_names WHERE queue_name IS NOT NULL
    UNION SELECT queue_name FROM ${s}.jobs WHERE status = 'running'
  ) AS known
  ORDER BY name
  LIMIT $1`,
);

/** The names of known queues, by name, at most `limit`. */
export async function knownQueueNames(db: Queryable, schema: string, limit: number): Promise<string[]> {
  const rows = await run<{ name: string }>(db, KnownQueueNameList(schema), [limit]);
  return rows.map((row) => row.name);
}

/**
 * QueueRecordFinished: inserts a queues row (settings all default) for each queue that has finished
 * jobs (succeeded records, dead or cancelled jobs) and none yet, at most $1 queues. Run by the
 * retention pass before it removes finished jobs, so a queue is still known once its last job is
 * gone. Loose scans of finished_jobs_queue_idx and jobs_terminal_queue_idx (one probe per name),
 * a primary-key probe of queues per name; inserts take the new rows' key locks only.
 */
const QueueRecordFinished = defineStatement(
  'record_finished_queues',
  (s) => `
  WITH RECURSIVE ${jobQueueNameScans(s)},
  found AS (
    SELECT queue_name FROM terminal_names WHERE queue_name IS NOT NULL
    UNION SELECT queue_name FROM finished_names WHERE queue_name IS NOT NULL
  ),
  recorded AS (
    INSERT INTO ${s}.queues (name)
    SELECT f.queue_name FROM found AS f
    WHERE NOT EXISTS (SELECT 1 FROM ${s}.queues AS q WHERE q.name = f.queue_name)
    ORDER BY f.queue_name
    LIMIT $1
    ON CONFLICT (name) DO NOTHING
    RETURNING name
  )
  SELECT count(*)::int AS recorded FROM recorded`,
);

/** Records the queues of finished jobs as queues rows (see QueueRecordFinished); returns how many. */
export async function recordKnownQueues(db: Queryable, schema: string, limit = 10_000): Promise<number> {
  const rows = await run<{ recorded: number }>(db, QueueRecordFinished(schema), [limit]);
  return rows[0]?.recorded ?? 0;
}

/**
 * QueueForget: deletes a queue's queues row (its settings), limiter row and round-robin cursor,
 * only when no job of the queue is left (in any state, finished records included) and no schedule
 * names it. Takes the queues row lock (primary key); the probes are those of QueueKnownRead.
 */
const QueueForget = defineStatement(
  'forget_queue',
  (s) => `
  WITH gone AS (
    DELETE FROM ${s}.queues AS q
    WHERE q.name = $1
      AND NOT EXISTS (SELECT 1 FROM ${s}.schedules WHERE queue_name = $1)
      AND NOT EXISTS (SELECT 1 FROM ${s}.jobs WHERE queue_name = $1 AND status = 'pending'
                        AND NOT awaits_predecessor AND waiting_parents = 0)
      AND NOT EXISTS (SELECT 1 FROM ${s}.jobs WHERE queue_name = $1 AND finished_at IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM ${s}.jobs WHERE queue_name = $1 AND status = 'pending' AND waiting_parents > 0)
      AND NOT EXISTS (SELECT 1 FROM ${s}.jobs WHERE queue_name = $1 AND awaits_predecessor)
      AND NOT EXISTS (SELECT 1 FROM ${s}.jobs WHERE status = 'running' AND queue_name = $1)
      AND NOT EXISTS (SELECT 1 FROM ${s}.finished_jobs WHERE queue_name = $1)
    RETURNING q.name
  ),
  limiter AS (
    DELETE FROM ${s}.rate_limits WHERE queue_name IN (SELECT name FROM gone)
  ),
  turns AS (
    DELETE FROM ${s}.fair_turns WHERE queue_name IN (SELECT name FROM gone)
  )
  SELECT count(*)::int AS forgotten FROM gone`,
);

/** Forgets a queue that has no job and no schedule left; false when it has (or had no row). */
export async function forgetQueueRow(db: Queryable, schema: string, queue: string): Promise<boolean> {
  const rows = await run<{ forgotten: number }>(db, QueueForget(schema), [queue]);
  return (rows[0]?.forgotten ?? 0) > 0;
}
