import { defineStatement, type Queryable, run } from '../db.js';
import { TAKE_KEY, wakeupChannel } from '../jobs/enqueue.js';

/**
 * ScheduleFire: fires a schedule's due ticks, (nothing) -> pending, one job per tick, in ONE
 * statement with the tick rows that make it exactly once:
 *   1. advanced: the schedule row's last_tick_at moves to $4 only if the row is still the one the
 *      ticks were computed from: same revision $2 (no change of definition, no pause), not paused,
 *      and last_tick_at still $3. The UPDATE takes the row lock; a concurrent scheduler's fire waits
 *      for it and then re-checks these conditions on the committed row (READ COMMITTED re-reads the
 *      updated row), finds last_tick_at moved, and changes nothing.
 *   2. ticks: one schedule_ticks row per tick in $5 (ascending), ON CONFLICT DO NOTHING on the
 *      primary key (schedule_name, tick_at): a tick any earlier statement fired inserts nothing.
 *      Each row carries the id its job will have, drawn here.
 *   3. keys and inserted: a job per tick row actually inserted, with the schedule's stored fields,
 *      available now; a schedule with an ordering key takes its key row as JobInsertOrdered does.
 * Empty $5 only advances last_tick_at (ticks skipped by catch_up 'none'). Notifies the queue's
 * listeners on commit when a job was inserted. Locks: the schedule row, the tick keys, the
 * ordering key row. Nothing here is on the claim or completion path.
 */
const ScheduleFire = defineStatement(
  'schedule_fire',
  (s) => `
  WITH advanced AS (
    UPDATE ${s}.schedules
    SET last_tick_at = $4::timestamptz
    WHERE name = $1 AND revision = $2::bigint AND NOT paused
      AND last_tick_at IS NOT DISTINCT FROM $3::timestamptz
    RETURNING queue_name, payload, priority, max_attempts, ordering_key, concurrency_key
  ),
  items AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')) AS id, t.tick_at
    FROM advanced, unnest($5::timestamptz[]) WITH ORDINALITY AS t(tick_at, ord)
    ORDER BY t.ord
  ),
  ticks AS (
    INSERT INTO ${s}.schedule_ticks (schedule_name, tick_at, job_id)
    SELECT $1, i.tick_at, i.id FROM items AS i
    ON CONFLICT (schedule_name, tick_at) DO NOTHING
    RETURNING tick_at, job_id
  ),
  keys AS (
    INSERT INTO ${s}.ordering_keys AS k (queue_name, ordering_key, head_id, waiting)
    SELECT a.queue_name, a.ordering_key, min(t.job_id), count(*)::int - 1
    FROM ticks AS t, advanced AS a
    WHERE a.ordering_key IS NOT NULL
    GROUP BY a.queue_name, a.ordering_key
    ${TAKE_KEY}
  ),
  inserted AS (
    INSERT INTO ${s}.jobs (id, queue_name, payload, priority, available_at, max_attempts,
                           ordering_key, concurrency_key, awaits_predecessor)
    OVERRIDING SYSTEM VALUE
    SELECT t.job_id, a.queue_name, a.payload, a.priority, now(), a.max_attempts,
           a.ordering_key, a.concurrency_key,
           a.ordering_key IS NOT NULL AND keys.head_id IS DISTINCT FROM t.job_id
    FROM ticks AS t CROSS JOIN advanced AS a
    LEFT JOIN keys ON keys.ordering_key = a.ordering_key
    ORDER BY t.job_id
    RETURNING id, queue_name
  )
  SELECT (SELECT count(*) FROM advanced)::int AS advanced,
         coalesce(array_agg(i.id::text ORDER BY i.id), '{}') AS job_ids,
         coalesce(array_agg(t.tick_at ORDER BY i.id), '{}') AS tick_ats,
         (SELECT count(pg_notify($6, a.queue_name)) FROM advanced AS a
          WHERE EXISTS (SELECT 1 FROM inserted)) AS notified
  FROM inserted AS i JOIN ticks AS t ON t.job_id = i.id`,
);

/** What ScheduleFire did. */
export interface FireOutcome {
  /** False when the row had moved on (fired by another process, changed, paused or removed). */
  advanced: boolean;
  /** The jobs inserted, one per tick newly fired, oldest tick first. */
  fired: { jobId: string; tickAt: Date }[];
}

/** What a fire is computed from: the row's identity as it was read. */
export interface FireBasis {
  name: string;
  revision: string;
  lastTickAt: Date | null;
}

/** Fires `ticks` (ascending) and moves the schedule's last tick to `newest`, if the row is still `basis`. */
export async function fireScheduleTicks(
  db: Queryable,
  schema: string,
  basis: FireBasis,
  newest: Date,
  ticks: readonly Date[],
): Promise<FireOutcome> {
  const rows = await run<{ advanced: number; job_ids: string[]; tick_ats: Date[] }>(
    db,
    ScheduleFire(schema),
    [basis.name, basis.revision, basis.lastTickAt, newest, ticks, wakeupChannel(schema)],
  );
  const row = rows[0];
  if (!row) return { advanced: false, fired: [] };
  return {
    advanced: row.advanced > 0,
    fired: row.job_ids.map((jobId, i) => ({ jobId, tickAt: row.tick_ats[i] as Date })),
  };
}

/**
 * ScheduleTickPrune: removes the ticks of schedule $1 older than its newest $2, at most $3 rows.
 * The cutoff is one backward scan of the primary key ($2 entries); the delete walks the same
 * index from the oldest. A pruned tick's job only loses its "created by" link. No row locks but
 * the deleted rows'.
 */
const ScheduleTickPrune = defineStatement(
  'schedule_tick_prune',
  (s) => `
  DELETE FROM ${s}.schedule_ticks AS t
  WHERE t.schedule_name = $1 AND t.tick_at IN (
    SELECT o.tick_at FROM ${s}.schedule_ticks AS o
    WHERE o.schedule_name = $1 AND o.tick_at < (
      SELECT c.tick_at FROM ${s}.schedule_ticks AS c
      WHERE c.schedule_name = $1 ORDER BY c.tick_at DESC OFFSET $2 - 1 LIMIT 1
    )
    ORDER BY o.tick_at
    LIMIT $3
  )
  RETURNING 1 AS gone`,
);

/** Prunes a schedule's ticks beyond the newest `keep`, at most `limit`; returns how many went. */
export async function pruneScheduleTicks(
  db: Queryable,
  schema: string,
  name: string,
  keep: number,
  limit: number,
): Promise<number> {
  const rows = await run(db, ScheduleTickPrune(schema), [name, keep, limit]);
  return rows.length;
}
