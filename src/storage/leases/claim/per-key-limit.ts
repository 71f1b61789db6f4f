/**
 * The per-key concurrency limit's fragments (composed in ../claim.ts): at most the queue's
 * concurrency_limit_per_key jobs of one concurrency key running at once, across all workers. Only a
 * queue with the limit set claims through them, so plain claims never pay for them.
 *
 * 1. `settings` (perKeySettings) reads the limit; the candidates (a window of $5 claimable jobs in
 *    preference order, or the round-robin claim's turns) are wider than $3 so that jobs of a
 *    saturated key can be passed over.
 * 2. `ranked` and `pre` keep, per key, only as many as the counters this statement's snapshot
 *    shows room for, then the first $3 in order: an optimistic choice that may still be too many.
 * 3. `slots` takes each chosen key's counter row lock in key order (no deadlock between claimers),
 *    reading the latest committed count, and grants least(wanted, limit - running), adding it to
 *    `running` in the same write (a new key's row starts with what `pre` wanted, which is within
 *    the limit). A concurrent claimer of the same key waits here, then sees ours.
 * 4. `chosen`: only the first `granted` jobs of each key in `pre`, exactly what was counted; the
 *    lease grant marks them `holds_key_slot` (`counted`). Jobs without a concurrency key are
 *    claimed as usual. The transitions that end a run (complete, fail, snooze, recovery, cancel)
 *    give the slot back (see ../key-slots.ts).
 */
import { PREFERENCE } from './fragments.js';

/** The order the limit ranks candidates in: preference, or the round-robin claim's turns. */
const order = (turns: boolean) => (turns ? 'turn_order' : PREFERENCE);

/**
 * `settings`: the queue's per-key limit; no row (so no candidate) for a paused queue, a queue with
 * a rate or concurrency limit, or, for the round-robin form, a queue no longer round-robin.
 */
export function perKeySettings(s: string, turns: boolean): string {
  return `settings AS (
    SELECT concurrency_limit_per_key AS per_key
    FROM ${s}.queues
    -- Nothing for a queue with a rate or concurrency limit: those are the throttled claim's (a
    -- worker role calling this function directly must not step around them; issue 17).
    WHERE name = $1 AND NOT paused AND rate_limit_max IS NULL AND concurrency_limit IS NULL${
      turns ? " AND fairness = 'round-robin'" : ''
    }
  )`;
}

/** The columns of the candidates that the steps below read. */
export const PER_KEY_COLUMNS: readonly string[] = ['concurrency_key', 'priority'];

/** Steps 2 to 4 above: `ranked`, `pre`, `slots` and `chosen`, over `candidate`. */
export function perKeySlotCtes(s: string, turns: boolean): string[] {
  return [
    `ranked AS (
    SELECT c.*, row_number() OVER (
             PARTITION BY c.concurrency_key ORDER BY ${turns ? 'c.turn_order' : 'c.priority DESC, c.available_at, c.id'}) AS rn,
           greatest(0, (SELECT per_key FROM settings) - coalesce(k.running, 0)) AS room
    FROM candidate AS c
    LEFT JOIN ${s}.concurrency_keys AS k ON k.queue_name = $1 AND k.concurrency_key = c.concurrency_key
  )`,
    `pre AS (
    SELECT id, concurrency_key, priority, available_at,${turns ? ' turn_order,' : ''}
           row_number() OVER (PARTITION BY concurrency_key ORDER BY ${order(turns)}) AS rn
    FROM (
      SELECT * FROM ranked
      WHERE concurrency_key IS NULL OR (SELECT per_key FROM settings) IS NULL OR rn <= room
      ORDER BY ${order(turns)}
      LIMIT $3
    ) AS first
  )`,
    `slots AS (
    INSERT INTO ${s}.concurrency_keys AS k (queue_name, concurrency_key, running, granted)
    SELECT $1, w.concurrency_key, w.n, w.n
    FROM (SELECT concurrency_key, count(*)::int AS n FROM pre
          WHERE concurrency_key IS NOT NULL AND (SELECT per_key FROM settings) IS NOT NULL
          GROUP BY concurrency_key) AS w
    ORDER BY w.concurrency_key
    ON CONFLICT (queue_name, concurrency_key) DO UPDATE
      SET granted = least(excluded.granted, greatest(0, (SELECT per_key FROM settings) - k.running)),
          running = k.running + least(excluded.granted, greatest(0, (SELECT per_key FROM settings) - k.running))
    RETURNING k.concurrency_key, k.granted
  )`,
    `chosen AS (
    SELECT pre.id, pre.concurrency_key IS NOT NULL AND slots.concurrency_key IS NOT NULL AS counted${
      turns ? ', pre.turn_order' : ''
    }
    FROM pre
    LEFT JOIN slots ON slots.concurrency_key = pre.concurrency_key
    WHERE slots.concurrency_key IS NULL OR pre.rn <= slots.granted
  )`,
  ];
}
