/**
 * Per-key concurrency slots given back, shared by every statement that ends a run (complete, fail,
 * snooze, recovery, cancel). `source` names a CTE of the jobs whose run ended, with `queue_name`,
 * `concurrency_key` and `holds_key_slot` (set only by the limited claim). Counter rows are locked
 * in key order through INSERT ... ON CONFLICT, as the limited claim locks them, so the two never
 * deadlock. Runs that took no slot (every plain job) contribute no row: nothing is written.
 * `queueParam` names the statement's one queue when it has one (complete, fail, snooze): the insert
 * writes that parameter, which a router (Citus, docs/scaling.md) can see, for the rows' own copy.
 */
export function keySlotsReleaseCte(s: string, source: string, queueParam?: string): string {
  return `key_slots_freed AS (
    INSERT INTO ${s}.concurrency_keys AS k (queue_name, concurrency_key, running, granted)
    SELECT ${queueParam === undefined ? 'queue_name' : `${queueParam}::text`}, concurrency_key, 0, count(*)::int
    FROM ${source}
    WHERE holds_key_slot
    GROUP BY queue_name, concurrency_key
    ORDER BY queue_name, concurrency_key
    ON CONFLICT (queue_name, concurrency_key) DO UPDATE
      SET running = greatest(0, k.running - excluded.granted)
  )`;
}
