import { defineStatement, type Queryable, run } from '../db.js';
import { wakeupChannel } from '../jobs/enqueue.js';

// The update both replay statements make: dead -> pending, claimable now, a fresh attempt budget
// (numbering restarts, or continues with max_attempts raised by the same budget), history kept,
// and the priority it was enqueued with (aging starts over). A dead head of an ordering key is
// still its key's head, so it is claimable again at once and the jobs behind it keep waiting.
const REPLAY_SET = `status = 'pending',
        available_at = now(),
        priority = coalesce(j.base_priority, j.priority),
        base_priority = NULL,
        finished_at = NULL,
        attempt_count = CASE WHEN $RESET THEN 0 ELSE j.attempt_count END,
        max_attempts = CASE WHEN $RESET THEN j.max_attempts
                            ELSE least(1000000, j.attempt_count + j.max_attempts) END`;

// The CTEs that follow the update (named `changed`, with `attempts_before`): the replay event,
// uncertain effects forgotten when asked, and one wake-up per queue. `queue`: the statement's one
// queue parameter when it has one, written into the events instead of the rows' copy (the same
// value) so that a router (Citus, docs/scaling.md) sees one queue in the insert.
const AFTER_REPLAY = (
  s: string,
  actor: string,
  reason: string,
  reset: string,
  forget: string,
  channel: string,
  queue = 'queue_name',
) => `
  recorded AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, status_after, error_code, actor, reason, detail)
    SELECT id, ${queue}, 'replayed', 'pending', last_error_code, ${actor}, ${reason},
           jsonb_build_object('attemptsBefore', attempts_before, 'resetAttempts', ${reset},
                              'retryUncertainEffects', ${forget})
    FROM changed
  ),
  forgotten AS (
    DELETE FROM ${s}.job_effects AS e
    USING changed
    WHERE ${forget} AND e.job_id = changed.id AND e.result_at IS NULL
  ),
  woken AS (
    SELECT count(pg_notify(${channel}, queue_name)) AS n
    FROM (SELECT DISTINCT queue_name FROM changed) AS q
  )`;

/**
 * JobReplayMany: dead -> pending for an explicit id list, all or nothing. Locks every listed job
 * that exists (FOR UPDATE, in id order so concurrent replays cannot deadlock), and changes them
 * only if every listed id is a dead job: otherwise nothing is written and the statuses found are
 * returned so the caller can say which job is not dead. Appends a `replayed` event per job (who,
 * why) in the same statement. Primary-key lookups.
 */
const JobReplayMany = defineStatement(
  'replay_jobs',
  (s) => `
  WITH wanted AS (
    SELECT DISTINCT unnest($1::bigint[]) AS id
  ),
  locked AS (
    SELECT j.id, j.status, j.attempt_count
    FROM ${s}.jobs AS j
    JOIN wanted USING (id)
    ORDER BY j.id
    FOR UPDATE OF j
  ),
  verdict AS (
    SELECT (SELECT count(*) FROM locked WHERE status = 'dead') = (SELECT count(*) FROM wanted) AS all_dead
  ),
  changed AS (
    UPDATE ${s}.jobs AS j
    SET ${REPLAY_SET.replaceAll('$RESET', '$4::boolean')}
    FROM locked, verdict
    WHERE j.id = locked.id AND verdict.all_dead AND j.status = 'dead'
    RETURNING j.id, j.queue_name, j.last_error_code, locked.attempt_count AS attempts_before
  ),
  ${AFTER_REPLAY(s, '$2', '$3', '$4::boolean', '$5::boolean', '$6')}
  SELECT wanted.id::text,
         coalesce(locked.status::text, CASE WHEN f.id IS NOT NULL THEN 'succeeded' END) AS status,
         changed.id IS NOT NULL AS replayed
  FROM wanted
  LEFT JOIN locked USING (id)
  LEFT JOIN changed USING (id)
  LEFT JOIN ${s}.finished_jobs AS f ON f.id = wanted.id
  CROSS JOIN woken
  ORDER BY wanted.id`,
);

/**
 * JobReplayBatch: dead -> pending for one bounded batch matching a filter: ids above $1, queue $2,
 * error code $3, died in [$4, $5), at most $6. Paged by id (a job that dies again during the
 * replay is not replayed twice); SKIP LOCKED passes rows another statement holds. Served by
 * jobs_terminal_id_idx. Same event and wake-up as JobReplayMany.
 * Two variants. Without a queue ($2 null) it spans queues. With one (`_in_queue`), $2 is a plain
 * `queue_name = $2` in the lookup and in the update, so in a layout split by queue (docs/scaling.md)
 * the batch is read and written in that queue's part only: `$2 IS NULL OR queue_name = $2` is
 * pruned in a custom plan but not in a generic one, and the update's join by id reached every part.
 */
const replayBatchStatement = (inQueue: boolean) => (s: string) =>
  `
  WITH batch AS (
    SELECT id, attempt_count
    FROM ${s}.jobs
    WHERE finished_at IS NOT NULL
      AND id > $1::bigint
      AND status = 'dead'
      AND ${inQueue ? 'queue_name = $2::text' : '($2::text IS NULL OR queue_name = $2)'}
      AND ($3::text IS NULL OR last_error_code = $3)
      AND finished_at >= $4::timestamptz
      AND finished_at < $5::timestamptz
    ORDER BY id
    LIMIT $6
    FOR UPDATE SKIP LOCKED
  ),
  changed AS (
    UPDATE ${s}.jobs AS j
    SET ${REPLAY_SET.replaceAll('$RESET', '$9::boolean')}
    FROM batch
    WHERE ${inQueue ? 'j.queue_name = $2::text AND ' : ''}j.id = batch.id AND j.status = 'dead'
    RETURNING j.id, j.queue_name, j.last_error_code, batch.attempt_count AS attempts_before
  ),
  ${AFTER_REPLAY(s, '$7', '$8', '$9::boolean', '$10::boolean', '$11', inQueue ? '$2::text' : undefined)}
  SELECT (SELECT count(*) FROM batch)::int AS seen,
         (SELECT count(*) FROM changed)::int AS replayed,
         (SELECT max(id) FROM batch)::text AS last_id
  FROM woken`;
const JobReplayBatch = defineStatement('replay_batch', replayBatchStatement(false));
const JobReplayBatchInQueue = defineStatement('replay_batch_in_queue', replayBatchStatement(true));

/**
 * DeadJobCount: how many dead jobs a replay filter matches now (for progress reporting).
 * Read-only; served by jobs_terminal_id_idx. `_in_queue`: for a filter with a queue, read in that
 * queue's part only (as JobReplayBatch's variant).
 */
const deadCountStatement = (inQueue: boolean) => (s: string) =>
  `
  SELECT count(*)::int AS n
  FROM ${s}.jobs
  WHERE finished_at IS NOT NULL
    AND status = 'dead'
    AND ${inQueue ? 'queue_name = $1::text' : '($1::text IS NULL OR queue_name = $1)'}
    AND ($2::text IS NULL OR last_error_code = $2)
    AND finished_at >= $3::timestamptz
    AND finished_at < $4::timestamptz`;
const DeadJobCount = defineStatement('count_dead', deadCountStatement(false));
const DeadJobCountInQueue = defineStatement('count_dead_in_queue', deadCountStatement(true));

/**
 * JobReplayListed: dead -> pending for the listed ids that are still dead, skipping the others (a
 * bulk action's batch: a job replayed or removed since it was listed is left alone). Locks with
 * SKIP LOCKED in id order; same event and wake-up as JobReplayMany. Primary-key lookups.
 * `_in_queue`: the listed jobs are all of queue $7 (the bulk action's filter names it), looked up
 * and written in that queue's part only (as JobReplayBatch's variant).
 */
const replayListedStatement = (inQueue: boolean) => (s: string) =>
  `
  WITH batch AS (
    SELECT id, attempt_count
    FROM ${s}.jobs
    WHERE ${inQueue ? 'queue_name = $7::text AND ' : ''}id = ANY($1::bigint[]) AND status = 'dead'
    ORDER BY id
    FOR UPDATE SKIP LOCKED
  ),
  changed AS (
    UPDATE ${s}.jobs AS j
    SET ${REPLAY_SET.replaceAll('$RESET', '$4::boolean')}
    FROM batch
    WHERE ${inQueue ? 'j.queue_name = $7::text AND ' : ''}j.id = batch.id AND j.status = 'dead'
    RETURNING j.id, j.queue_name, j.last_error_code, batch.attempt_count AS attempts_before
  ),
  ${AFTER_REPLAY(s, '$2', '$3', '$4::boolean', '$5::boolean', '$6', inQueue ? '$7::text' : undefined)}
  SELECT (SELECT count(*) FROM changed)::int AS replayed FROM woken`;
const JobReplayListed = defineStatement('replay_listed', replayListedStatement(false));
const JobReplayListedInQueue = defineStatement('replay_listed_in_queue', replayListedStatement(true));

/**
 * Replays the listed jobs that are still dead; returns how many it replayed. `queue`: every listed
 * job is of that queue (null: not known), and the statement looks in that queue's part only.
 */
export async function replayListed(
  db: Queryable,
  schema: string,
  ids: readonly string[],
  params: ReplayParams,
  queue: string | null = null,
): Promise<number> {
  const values: unknown[] = [
    ids,
    params.actor,
    params.reason,
    params.resetAttempts,
    params.retryUncertainEffects,
    wakeupChannel(schema),
  ];
  const rows = await run<{ replayed: number }>(
    db,
    queue === null ? JobReplayListed(schema) : JobReplayListedInQueue(schema),
    queue === null ? values : [...values, queue],
  );
  return rows[0]?.replayed ?? 0;
}

/** Who replays, why, and how. */
export interface ReplayParams {
  actor: string | null;
  reason: string;
  resetAttempts: boolean;
  retryUncertainEffects: boolean;
}

/** Which dead jobs a filter replay takes. */
export interface ReplayFilterParams {
  queue: string | null;
  errorCode: string | null;
  since: Date | null;
  before: Date | null;
}

/** Per listed id: its status when looked at (null: no such job), and whether it was replayed. */
export async function replayJobs(
  db: Queryable,
  schema: string,
  ids: readonly string[],
  params: ReplayParams,
): Promise<{ id: string; status: string | null; replayed: boolean }[]> {
  return run(db, JobReplayMany(schema), [
    ids,
    params.actor,
    params.reason,
    params.resetAttempts,
    params.retryUncertainEffects,
    wakeupChannel(schema),
  ]);
}

/** Replays one batch of a filter above id `afterId` (in the filter's queue's part, when it names one). */
export async function replayBatch(
  db: Queryable,
  schema: string,
  filter: ReplayFilterParams,
  afterId: string,
  limit: number,
  params: ReplayParams,
): Promise<{ seen: number; replayed: number; lastId: string | null }> {
  const rows = await run<{ seen: number; replayed: number; last_id: string | null }>(
    db,
    filter.queue === null ? JobReplayBatch(schema) : JobReplayBatchInQueue(schema),
    [
      afterId,
      filter.queue,
      filter.errorCode,
      filter.since ?? '-infinity',
      filter.before ?? 'infinity',
      limit,
      params.actor,
      params.reason,
      params.resetAttempts,
      params.retryUncertainEffects,
      wakeupChannel(schema),
    ],
  );
  const row = rows[0];
  return { seen: row?.seen ?? 0, replayed: row?.replayed ?? 0, lastId: row?.last_id ?? null };
}

/** Counts the dead jobs a filter matches. */
export async function countDeadJobs(
  db: Queryable,
  schema: string,
  filter: ReplayFilterParams,
): Promise<number> {
  const statement = filter.queue === null ? DeadJobCount(schema) : DeadJobCountInQueue(schema);
  const rows = await run<{ n: number }>(db, statement, [
    filter.queue,
    filter.errorCode,
    filter.since ?? '-infinity',
    filter.before ?? 'infinity',
  ]);
  return rows[0]?.n ?? 0;
}
