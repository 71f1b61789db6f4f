import { cancelledSet } from '../../cancel-set.js';
import { defineStatement } from '../../db.js';
import { keySlotsReleaseCte } from '../../queues/key-slots.js';
import type { NewJob } from './fields.js';
import { availableAt, type ItemField, insertJobsFrom, itemsWithIds, rowOfItem } from './fragments.js';

// The dedupe statement of the enqueue module (../enqueue.ts chooses it for a batch with dedupe keys).

/** How an enqueue with `dedupe` treats the job its key names. */
export type DedupeMode = 'throttle' | 'debounce' | 'replace';

/** A validated job with its dedupe key (null: a plain job in the same batch). */
export interface NewDedupedJob extends NewJob {
  dedupeKey: string | null;
  mode: DedupeMode | null;
  /** Window of throttle and debounce, in ms; null for replace. */
  windowMs: number | null;
  /** Enqueues of the same key folded into this one inside the batch: each leaves an event. */
  folded: number;
}

/** The fields a deduplicated batch carries per job after its own: $8..$13. */
const DEDUPE_ITEM_FIELDS: readonly ItemField[] = [
  'ordering_key',
  'concurrency_key',
  'dedupe_key',
  'mode',
  'window_ms',
  'folded',
];

/**
 * What one item's key did: `created` (a new job), `collapsed` (folded into the job the key names),
 * `replaced` (a new job; the running one the key named was cancelled), `plain` (no key), or `stale`
 * (nothing written: the key row was moved by a transaction that committed after this statement's
 * snapshot was taken, so the job it names could not be read; run the item again).
 */
export type DedupeOutcome = 'created' | 'collapsed' | 'replaced' | 'plain' | 'stale';

// What the upsert of a key row decides, evaluated against the locked, latest version of the row
// (`k`). `seen` is the key as this statement's snapshot saw it and `target` the job it named,
// locked FOR UPDATE (so its status is current and stays so until commit). A throttle looks at
// the window only. Debounce and replace first check that the locked key row still names the job
// the snapshot saw: otherwise a concurrent enqueue committed a new job this snapshot cannot see,
// and acting would make a second one (`stale`). A job that is neither pending nor running, or is
// gone, is replaced by a new one; debounce leaves a running job alone and queues a new one.
const OUTCOME = `(CASE
      WHEN excluded.mode = 'throttle' THEN
        CASE WHEN k.window_ends_at > now() THEN 'collapsed' ELSE 'created' END
      WHEN k.job_id IS DISTINCT FROM (SELECT seen.job_id FROM seen WHERE seen.dedupe_key = k.dedupe_key)
        THEN 'stale'
      ELSE coalesce((
        SELECT CASE
          WHEN t.status NOT IN ('pending', 'running') THEN 'created'
          WHEN t.status = 'running' AND excluded.mode = 'debounce' THEN 'created'
          WHEN t.ordering_key IS DISTINCT FROM (
            SELECT i.ordering_key FROM items AS i WHERE i.dedupe_key = k.dedupe_key) THEN 'ordering_conflict'
          WHEN t.status = 'pending' THEN 'collapsed'
          ELSE 'replaced' END
        FROM target AS t WHERE t.id = k.job_id), 'created')
    END)`;

/**
 * JobInsertDeduped: (nothing) -> pending, or a pending job's payload (and run time) rewritten, or
 * running -> cancelled plus (nothing) -> pending, for a batch of queue $1 where items carry a
 * dedupe key (at most one item per key: the client folds duplicates first).
 * 1. `items` draws an id per item. `seen` reads the items' key rows as the snapshot saw them;
 *    `held` locks the same rows (FOR UPDATE, in key order: the latest committed versions); `target`
 *    then locks the pending or running jobs they name (debounce and replace only, and only where
 *    the key still names what the snapshot saw), in id order. Keys before jobs, always: a stale
 *    run inside a transaction keeps its key row locked, and a claim or cancel locks a job without
 *    ever waiting for a key, so no cycle forms. Each step is forced to finish before the next
 *    starts by an uncorrelated count of the previous one (an InitPlan, or the upsert's input).
 * 2. `keys` upserts each key row in key order (ON CONFLICT DO UPDATE waits for a concurrent
 *    enqueue of a key this snapshot did not see and then reads the row it committed). The row's
 *    `outcome` says what happens; on `created` or `replaced` it names the item's new job.
 * 3. Collapsed items rewrite the surviving job (debounce: payload, available_at = now() + window;
 *    replace: payload and the item's run time; throttle: nothing) and append `deduplicated`
 *    events; replaced running jobs are cancelled exactly as lh.cancel does (token bumped, so the
 *    old worker's completion is refused and counted; `cancelled` event; per-key slot given back).
 * 4. New jobs are inserted as JobInsertOrdered (statements.ts) does, with one difference: the job that replaces
 *    its key's running head takes that head's place (the key's row moves its head to it), so a
 *    replacement keeps its place in line and needs no hand-over.
 * Returns, per item in input order, the job id the item resolved to and its outcome. With $14,
 * notifies listeners of the queue on commit when a job was inserted or rewritten (without: an
 * autocommit enqueue whose wake-up the coalescer sends, as JobInsertQuiet). Jobs: primary-key
 * lookups; keys: dedupe_keys' and ordering_keys' primary keys.
 */
export const JobInsertDeduped = defineStatement(
  'enqueue_deduped',
  (s) => `
  WITH ${itemsWithIds(s, DEDUPE_ITEM_FIELDS)},
  seen AS MATERIALIZED (
    SELECT d.dedupe_key, d.job_id
    FROM ${s}.dedupe_keys AS d
    WHERE d.queue_name = $1 AND d.dedupe_key IN (SELECT dedupe_key FROM items WHERE dedupe_key IS NOT NULL)
  ),
  held AS MATERIALIZED (
    SELECT d.dedupe_key, d.job_id
    FROM ${s}.dedupe_keys AS d
    WHERE d.queue_name = $1 AND d.dedupe_key IN (SELECT dedupe_key FROM items WHERE dedupe_key IS NOT NULL)
    ORDER BY d.dedupe_key
    FOR UPDATE OF d
  ),
  target AS MATERIALIZED (
    SELECT j.id, j.status::text AS status, j.ordering_key, j.concurrency_key, j.holds_key_slot,
           j.lease_owner, j.lease_token, j.lease_claim_id, j.claimed_at, j.lease_extensions, j.attempt_count
    FROM ${s}.jobs AS j
    WHERE (SELECT count(*) FROM held) >= 0
      AND j.id IN (SELECT held.job_id FROM held JOIN seen USING (dedupe_key, job_id)
                   JOIN items AS i USING (dedupe_key) WHERE i.mode <> 'throttle')
      AND j.status IN ('pending', 'running')
    ORDER BY j.id
    FOR UPDATE OF j
  ),
  keys AS (
    INSERT INTO ${s}.dedupe_keys AS k (queue_name, dedupe_key, job_id, mode, window_ends_at, outcome)
    SELECT $1, i.dedupe_key, i.id, i.mode, now() + i.window_ms * interval '1 millisecond', 'created'
    FROM items AS i CROSS JOIN (SELECT count(*) FROM target) AS locked
    WHERE i.dedupe_key IS NOT NULL
    ORDER BY i.dedupe_key
    ON CONFLICT (queue_name, dedupe_key) DO UPDATE
      SET outcome = ${OUTCOME},
          job_id = CASE WHEN ${OUTCOME} IN ('created', 'replaced') THEN excluded.job_id ELSE k.job_id END,
          mode = CASE WHEN ${OUTCOME} = 'stale' THEN k.mode ELSE excluded.mode END,
          window_ends_at = CASE
            WHEN ${OUTCOME} = 'stale' OR (excluded.mode = 'throttle' AND k.window_ends_at > now())
              THEN k.window_ends_at
            ELSE excluded.window_ends_at END
    RETURNING k.dedupe_key, k.job_id, k.outcome
  ),
  outcomes AS MATERIALIZED (
    SELECT i.*, coalesce(keys.outcome, 'plain') AS outcome,
           CASE WHEN keys.outcome = 'collapsed' THEN keys.job_id ELSE i.id END AS job_id,
           seen.job_id AS old_id
    FROM items AS i
    LEFT JOIN keys ON keys.dedupe_key = i.dedupe_key
    LEFT JOIN seen ON seen.dedupe_key = i.dedupe_key
  ),
  rewritten AS (
    UPDATE ${s}.jobs AS j
    SET payload = o.payload::jsonb,
        available_at = CASE WHEN o.mode = 'debounce' THEN now() + o.window_ms * interval '1 millisecond'
                            ELSE ${availableAt('o.run_at', 'o.delay_ms')} END
    FROM outcomes AS o
    WHERE o.outcome = 'collapsed' AND o.mode <> 'throttle' AND j.id = o.job_id AND j.status = 'pending'
    RETURNING j.id
  ),
  collapse_events AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, status_after, detail)
    SELECT o.job_id, $1, 'deduplicated', CASE WHEN o.mode = 'throttle' THEN NULL ELSE 'pending' END,
           jsonb_build_object('mode', o.mode, 'key', o.dedupe_key)
             || CASE WHEN o.outcome = 'replaced' THEN jsonb_build_object('replacedJob', o.old_id::text) ELSE '{}' END
    FROM outcomes AS o
    CROSS JOIN LATERAL generate_series(1, o.folded + CASE WHEN o.outcome IN ('collapsed', 'replaced') THEN 1 ELSE 0 END)
    WHERE o.outcome IN ('created', 'collapsed', 'replaced')
  ),
  cancelled AS (
    UPDATE ${s}.jobs AS j
    ${cancelledSet("'replaced by job ' || o.id")}
    FROM outcomes AS o JOIN target AS t ON t.id = o.old_id
    WHERE o.outcome = 'replaced' AND j.id = t.id AND j.status = 'running'
    RETURNING j.id, j.queue_name, j.concurrency_key, t.holds_key_slot, t.lease_owner, t.lease_token,
              t.lease_claim_id, t.claimed_at, t.lease_extensions, t.attempt_count, o.id AS new_id
  ),
  ${keySlotsReleaseCte(s, 'cancelled')},
  cancel_events AS (
    INSERT INTO ${s}.job_events (job_id, queue_name, kind, status_after, attempt, lease_owner, lease_token,
                                 lease_claim_id, claimed_at, lease_extensions, error_code, reason, detail)
    SELECT id, queue_name, 'cancelled', 'cancelled', attempt_count, lease_owner, lease_token,
           lease_claim_id, claimed_at, lease_extensions, 'CANCELLED', 'replaced',
           jsonb_build_object('replacedBy', new_id::text)
    FROM cancelled
  ),
  fresh AS (
    SELECT o.*, t.id AS displaced
    FROM outcomes AS o
    LEFT JOIN target AS t ON o.outcome = 'replaced' AND t.id = o.old_id AND t.ordering_key IS NOT NULL
    WHERE o.outcome IN ('created', 'replaced', 'plain')
  ),
  groups AS (
    SELECT ordering_key, coalesce(min(id) FILTER (WHERE displaced IS NOT NULL), min(id)) AS first_id,
           count(*)::int AS n, max(displaced) AS displaced
    FROM fresh
    WHERE ordering_key IS NOT NULL
    GROUP BY ordering_key
  ),
  ordering AS (
    INSERT INTO ${s}.ordering_keys AS k (queue_name, ordering_key, head_id, waiting)
    SELECT $1, g.ordering_key, g.first_id, g.n - 1
    FROM groups AS g
    ORDER BY g.ordering_key
    ON CONFLICT (queue_name, ordering_key) DO UPDATE
      SET head_id = CASE
            WHEN (k.head_id IS NULL AND k.waiting = 0)
              OR k.head_id = (SELECT g.displaced FROM groups AS g WHERE g.ordering_key = k.ordering_key)
            THEN excluded.head_id ELSE k.head_id END,
          waiting = CASE
            WHEN k.head_id IS NULL AND k.waiting = 0 THEN excluded.waiting
            WHEN k.head_id = (SELECT g.displaced FROM groups AS g WHERE g.ordering_key = k.ordering_key)
              THEN k.waiting + excluded.waiting
            ELSE k.waiting + excluded.waiting + 1 END
    RETURNING k.ordering_key, k.head_id
  ),
  inserted AS (
    ${insertJobsFrom(
      s,
      {
        id: 'f.id',
        ...rowOfItem('f', ['ordering_key', 'concurrency_key']),
        available_at: `CASE WHEN f.mode = 'debounce' THEN now() + f.window_ms * interval '1 millisecond'
                ELSE ${availableAt('f.run_at', 'f.delay_ms')} END`,
        awaits_predecessor: 'f.ordering_key IS NOT NULL AND ordering.head_id IS DISTINCT FROM f.id',
      },
      'fresh AS f\n    LEFT JOIN ordering ON ordering.ordering_key = f.ordering_key',
      '\n    ORDER BY f.id',
    )}
  )
  SELECT CASE WHEN o.outcome = 'stale' THEN NULL ELSE o.job_id::text END AS id, o.outcome,
         CASE WHEN o.outcome = 'replaced' THEN o.old_id::text END AS cancelled_id,
         (SELECT count(pg_notify($7, $1))
          FROM (SELECT id FROM inserted UNION ALL SELECT id FROM rewritten LIMIT 1) AS changed
          WHERE $14::boolean) AS notified
  FROM outcomes AS o
  ORDER BY o.ord`,
);
