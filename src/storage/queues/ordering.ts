import { defineStatement, type Queryable, run } from '../db.js';
import { wakeupChannel } from '../jobs/enqueue.js';

// The next job of a key: the earliest one waiting behind the head (jobs_ordering_waiting_idx, one
// probe), other than `except` (the job being finished). `k` is the ordering_keys row.
const NEXT_WAITING = (s: string, except = 'NULL') => `(
      SELECT w.id FROM ${s}.jobs AS w
      WHERE w.queue_name = k.queue_name AND w.ordering_key = k.ordering_key AND w.awaits_predecessor
        AND w.id IS DISTINCT FROM ${except}
      ORDER BY w.id LIMIT 1)`;

/**
 * Takes each finished job in `source` (a CTE or subquery with `id`, `queue_name`, `ordering_key`)
 * out of its key's line, in the statement that finished it: when it is the key's head (read from
 * the locked key row, the latest committed version), the head moves to the key's next waiting job,
 * which becomes claimable; when it was waiting (a cancelled job), the key just counts one fewer. Key rows are locked in key order (INSERT ... ON CONFLICT, as enqueue locks
 * them), so a concurrent enqueue of the key either committed before (and its job is seen when this
 * statement's snapshot includes it) or waits and then sees the new head. Defines `keys_advanced`
 * (key rows after the move) and `keys_released` (jobs made claimable). A key whose next job this
 * statement's snapshot could not see (enqueued concurrently, or cancelled concurrently) is reported
 * by `orderingRepairNeeded` and repaired by the next statement (see repairOrderingKeys).
 * Sources without keyed rows (every plain job) write nothing.
 * `queueParam` names the statement's one queue when it has one (a completion): a key and all its
 * jobs are of one queue, so the next head is looked up in that queue's part of a layout split by
 * queue only (docs/scaling.md).
 */
export function orderingAdvanceCte(s: string, source: string, queueParam?: string): string {
  return `keys_advanced AS (
    INSERT INTO ${s}.ordering_keys AS k (queue_name, ordering_key, head_id, waiting)
    SELECT ${queueParam === undefined ? 'queue_name' : `${queueParam}::text`}, ordering_key, id, 0
    FROM ${source}
    WHERE ordering_key IS NOT NULL
    ORDER BY queue_name, ordering_key
    ON CONFLICT (queue_name, ordering_key) DO UPDATE
      SET head_id = CASE WHEN k.head_id = excluded.head_id
                         THEN ${NEXT_WAITING(s, 'excluded.head_id')} ELSE k.head_id END,
          waiting = greatest(0, k.waiting - CASE
            WHEN k.head_id IS DISTINCT FROM excluded.head_id THEN 1
            WHEN ${NEXT_WAITING(s, 'excluded.head_id')} IS NULL THEN 0 ELSE 1 END)
    RETURNING k.queue_name, k.ordering_key, k.head_id, k.waiting
  ),
  keys_released AS (
    UPDATE ${s}.jobs AS w
    SET awaits_predecessor = false
    FROM keys_advanced AS a
    WHERE w.id = a.head_id AND w.awaits_predecessor AND w.status = 'pending'${
      queueParam === undefined ? '' : `\n      AND w.queue_name = ${queueParam}::text`
    }
    RETURNING w.id, w.queue_name
  )`;
}

/**
 * SQL expression: keys this statement advanced but could not hand to a next job it saw released
 * (a cancelled waiter's key is listed too: its head did not move; the repair finds it live).
 */
export function orderingRepairNeeded(): string {
  return `(SELECT coalesce(array_agg(a.queue_name || chr(31) || a.ordering_key), '{}')
     FROM keys_advanced AS a
     WHERE (a.head_id IS NULL AND a.waiting > 0)
        OR (a.head_id IS NOT NULL AND a.head_id NOT IN (SELECT id FROM keys_released)))`;
}

/** SQL expression: wakes the queues whose keys released a job (notifications fold per transaction). */
export function orderingWakeups(channel: string): string {
  return `(SELECT count(pg_notify(${channel}, r.queue_name))
     FROM (SELECT DISTINCT queue_name FROM keys_released) AS r)`;
}

// The repair, for a set of target keys chosen by `targetWhere` (over ordering_keys k): a key whose
// head is missing or no longer live gets its earliest waiting job as head, made claimable; an idle
// key (no head, nothing waiting) is removed, so ordering_keys holds only keys with unfinished jobs.
// Locks key rows in key order (`lock`: the sweep skips locked keys; a reported key waits for its
// lock, then reads the latest row). `limit` and `channel` name the parameters holding the most keys
// and the wake-up channel. `missed`: keys still without a head because this statement's snapshot
// saw none of their waiting jobs (enqueued while it waited): a new statement will.
const REPAIR = (s: string, targetWhere: string, lock: string, limit: string, channel: string) => `
  WITH target AS (
    SELECT k.queue_name, k.ordering_key, k.head_id, k.waiting
    FROM ${s}.ordering_keys AS k
    WHERE ${targetWhere}
    ORDER BY k.queue_name, k.ordering_key
    LIMIT ${limit}
    ${lock}
  ),
  stale AS (
    SELECT t.queue_name, t.ordering_key, t.waiting
    FROM target AS t
    WHERE NOT EXISTS (
      SELECT 1 FROM ${s}.jobs AS h
      WHERE h.id = t.head_id AND NOT h.awaits_predecessor AND h.status IN ('pending', 'running', 'dead'))
  ),
  idle AS (
    DELETE FROM ${s}.ordering_keys AS k
    USING stale
    WHERE k.queue_name = stale.queue_name AND k.ordering_key = stale.ordering_key
      AND stale.waiting = 0 AND k.waiting = 0
    RETURNING k.queue_name
  ),
  next AS (
    SELECT k.queue_name, k.ordering_key, ${NEXT_WAITING(s)} AS id
    FROM stale AS k
    WHERE k.waiting > 0
  ),
  keys_advanced AS (
    UPDATE ${s}.ordering_keys AS k
    SET head_id = next.id, waiting = greatest(0, k.waiting - 1)
    FROM next
    WHERE k.queue_name = next.queue_name AND k.ordering_key = next.ordering_key AND next.id IS NOT NULL
    RETURNING k.queue_name, k.ordering_key, k.head_id, k.waiting
  ),
  keys_released AS (
    UPDATE ${s}.jobs AS w
    SET awaits_predecessor = false
    FROM keys_advanced AS a
    WHERE w.id = a.head_id AND w.awaits_predecessor
    RETURNING w.id, w.queue_name
  )
  SELECT (SELECT count(*) FROM target)::int AS seen,
         (SELECT count(*) FROM keys_released)::int AS released,
         (SELECT count(*) FROM idle)::int AS removed,
         (SELECT count(*) FROM next WHERE id IS NULL)::int AS missed,
         ${orderingWakeups(channel)} AS woken,
         (SELECT lt.queue_name FROM target AS lt ORDER BY lt.queue_name DESC, lt.ordering_key DESC LIMIT 1) AS last_queue,
         (SELECT lt.ordering_key FROM target AS lt ORDER BY lt.queue_name DESC, lt.ordering_key DESC LIMIT 1) AS last_key`;

/**
 * OrderingKeyRepairListed: the repair for the keys a finishing statement reported ($1 queues, $2
 * keys, zipped), right after it. Primary-key lookups of ordering_keys.
 */
export const OrderingKeyRepairListed = defineStatement('repair_listed_ordering_keys', (s) =>
  REPAIR(
    s,
    `(k.queue_name, k.ordering_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
    'FOR UPDATE OF k',
    '$3',
    '$4',
  ),
);

/**
 * OrderingKeyRepairSweep: the repair for up to $1 keys without a head, found through
 * ordering_keys_headless_idx (keys whose hand-over was missed, and idle keys).
 */
export const OrderingKeyRepairSweep = defineStatement('repair_headless_ordering_keys', (s) =>
  REPAIR(s, 'k.head_id IS NULL', 'FOR UPDATE OF k SKIP LOCKED', '$1', '$2'),
);

/**
 * OrderingKeyRepairScan: the repair for up to $1 keys after the cursor ($3 queue, $4 key), in key
 * order, whatever their head: it catches a key whose head is set but no longer live (a hand-over
 * that made a just-cancelled job head, when the process died before its follow-up repair). Pages
 * through ordering_keys by primary key; skips keys locked by a statement changing them.
 */
export const OrderingKeyRepairScan = defineStatement('repair_scan_ordering_keys', (s) =>
  REPAIR(
    s,
    '(k.queue_name, k.ordering_key) > ($3::text, $4::text)',
    'FOR UPDATE OF k SKIP LOCKED',
    '$1',
    '$2',
  ),
);

/** Where a paged scan of ordering keys stopped; null starts from the first key. */
export type OrderingKeyCursor = { queue: string; key: string } | null;

/**
 * Repairs up to `limit` keys after `cursor`, whatever their head; returns what it did and the
 * cursor of the next page (null once the scan wrapped around to the start).
 */
export async function scanOrderingKeys(
  db: Queryable,
  schema: string,
  limit: number,
  cursor: OrderingKeyCursor,
): Promise<{ result: OrderingRepairResult; next: OrderingKeyCursor }> {
  const rows = await run<OrderingRepairResult & { last_queue: string | null; last_key: string | null }>(
    db,
    OrderingKeyRepairScan(schema),
    [limit, wakeupChannel(schema), cursor?.queue ?? '', cursor?.key ?? ''],
  );
  const row = rows[0];
  const result = {
    seen: row?.seen ?? 0,
    released: row?.released ?? 0,
    removed: row?.removed ?? 0,
    missed: row?.missed ?? 0,
  };
  const next =
    row && row.seen >= limit && row.last_queue !== null && row.last_key !== null
      ? { queue: row.last_queue, key: row.last_key }
      : null;
  return { result, next };
}

/** What one repair pass did. */
export interface OrderingRepairResult {
  seen: number;
  released: number;
  removed: number;
  missed: number;
}

/** Attempts at repairing reported keys before leaving them to the fairness pass. */
const LISTED_REPAIR_ATTEMPTS = 3;

/**
 * Repairs the listed keys (`queue \u001f key` strings, as `orderingRepairNeeded` returns them), or,
 * with none listed, up to `limit` keys without a head.
 */
export async function repairOrderingKeys(
  db: Queryable,
  schema: string,
  keys: readonly string[],
  limit: number,
): Promise<OrderingRepairResult> {
  const queues: string[] = [];
  const names: string[] = [];
  for (const key of keys) {
    const split = key.indexOf('\u001f');
    queues.push(key.slice(0, split));
    names.push(key.slice(split + 1));
  }
  if (keys.length === 0) {
    const rows = await run<OrderingRepairResult>(db, OrderingKeyRepairSweep(schema), [
      limit,
      wakeupChannel(schema),
    ]);
    return rows[0] ?? { seen: 0, released: 0, removed: 0, missed: 0 };
  }
  const total = { seen: 0, released: 0, removed: 0, missed: 0 };
  for (let attempt = 0; attempt < LISTED_REPAIR_ATTEMPTS; attempt++) {
    const rows = await run<OrderingRepairResult>(db, OrderingKeyRepairListed(schema), [
      queues,
      names,
      keys.length,
      wakeupChannel(schema),
    ]);
    const row = rows[0] ?? { seen: 0, released: 0, removed: 0, missed: 0 };
    total.seen += row.seen;
    total.released += row.released;
    total.removed += row.removed;
    total.missed = row.missed;
    if (row.missed === 0) break;
  }
  return total;
}

/**
 * BlockedKeyList: ordering keys whose head is dead, longest blocked first, at most $2, in queue $1
 * (or all). Reads dead jobs through jobs_terminal_finished_idx (terminal jobs only: few), each
 * joined to its key row by primary key for the number of jobs waiting behind it. Read-only.
 */
const BlockedKeyList = defineStatement(
  'list_blocked_keys',
  (s) => `
  SELECT j.queue_name, j.ordering_key, j.id::text AS head_id, j.finished_at AS blocked_since,
         extract(epoch FROM now() - j.finished_at)::float8 * 1000 AS blocked_ms,
         coalesce(k.waiting, 0) AS waiting, j.last_error_code
  FROM ${s}.jobs AS j
  LEFT JOIN ${s}.ordering_keys AS k ON k.queue_name = j.queue_name AND k.ordering_key = j.ordering_key
  WHERE j.finished_at IS NOT NULL
    AND j.status = 'dead'
    AND j.ordering_key IS NOT NULL
    AND ($1::text IS NULL OR j.queue_name = $1)
  ORDER BY j.finished_at, j.id
  LIMIT $2`,
);

/** A blocked key as listed. */
export interface BlockedKeyRow {
  queue_name: string;
  ordering_key: string;
  head_id: string;
  blocked_since: Date;
  blocked_ms: number;
  waiting: number;
  last_error_code: string | null;
}

/** Lists keys blocked by a dead head. */
export function listBlockedKeys(
  db: Queryable,
  schema: string,
  queue: string | null,
  limit: number,
): Promise<BlockedKeyRow[]> {
  return run<BlockedKeyRow>(db, BlockedKeyList(schema), [queue, limit]);
}
