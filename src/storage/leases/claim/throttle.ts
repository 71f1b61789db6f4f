/**
 * The throttle's fragments (composed in ../claim.ts): a claim within the queue's rate limit (at
 * most rate_limit_max starts in any interval of rate_limit_per_ms, queue-wide or per concurrency
 * key) and its concurrency limit (at most concurrency_limit live leases). Only a queue with one of
 * these set claims through them (the plain claim yields nothing for it), so plain claims never pay.
 *
 * 1. `candidate` locks a window of $5 claimable jobs in preference order (SKIP LOCKED, served by
 *    jobs_claimable_idx): $3 for a queue-wide limit, wider per key, so that jobs of a key out of
 *    starts can be passed over. Each job's bucket is '' (queue-wide) or its concurrency key. This
 *    runs before the limiter lock, in parallel with other claimers, which skip these rows.
 * 2. `lim` then locks the queue's rate_limits row (only when there is a candidate: an empty claim
 *    takes no lock): limited claims of one queue take turns from here to their commit. In READ
 *    COMMITTED the lock returns the row's newest version, so `lim.claimed_total` counts every
 *    claim committed before ours, while `seen` (the same row, read plainly) shows the statement
 *    snapshot's. `clock` takes the start time after the lock, so starts are stamped in the order
 *    the lock granted them and a window trimmed by one claim is never needed by the next.
 *    (Measured: locking first and scanning after made four contending claimers wade through the
 *    rows their predecessors had just claimed, visible as pending in their older snapshots.)
 * 3. Live leases: the snapshot's count of the queue's running jobs with an unexpired lease
 *    (jobs_queue_slots_idx), plus the claims committed after the snapshot (lim - seen, all still
 *    running as far as anyone may assume). A lease that lapsed frees its slot at once, without
 *    waiting for the recovery sweep; a heartbeat cannot revive a lapsed lease (the fence).
 * 4. `pre` keeps, per bucket, as many as the snapshot's window (`usage`) leaves, then the first
 *    least($3, free slots) in preference order: an optimistic choice.
 * 5. `debit` upserts each chosen bucket's window in bucket order; ON CONFLICT reads the newest row
 *    (a bucket first used after our snapshot included), trims starts older than one window, grants
 *    least(wanted, max - starts in the window) and appends one entry (now, granted).
 * 6. Only the first `granted` jobs of each bucket in `pre` are claimed (`chosen`): exactly what was
 *    debited. Their lease starts at `clock` and holds a queue slot (holds_queue_slot).
 * 7. `verdict`: the claim was throttled when it took fewer than least($3, candidates). It then
 *    tells the caller how long to wait, in database time: until the oldest start in a blocked
 *    bucket's window leaves it (rate), or, when slots were short, until the earliest live lease
 *    lapses but at most the recheck parameter's ms (a slot also frees whenever a job ends, which
 *    nobody announces). `tally` adds the claims to claimed_total and the throttled interval to the
 *    queue's counters (the union of intervals, so three throttled workers do not count the same
 *    wait three times).
 * The statement returns the claimed jobs plus one row with a null id: the verdict (throttleAnswer).
 */
import { CLAIMABLE, CLAIMED_COLUMNS, CLAIMED_COMPUTED } from './fragments.js';

/** Step 1's gate and what later steps read: the queue's limits (no row: paused or no limit), and the snapshot's claimed_total. */
export function throttleSettings(s: string): string[] {
  return [
    `settings AS (
    SELECT rate_limit_max AS rate_max,
           rate_limit_per_ms::double precision * interval '1 millisecond' AS per,
           rate_limit_per_key AS per_key,
           concurrency_limit AS conc_max
    FROM ${s}.queues
    WHERE name = $1 AND NOT paused AND (rate_limit_max IS NOT NULL OR concurrency_limit IS NOT NULL)
  )`,
    `seen AS (
    SELECT claimed_total FROM ${s}.rate_limits WHERE queue_name = $1
  )`,
  ];
}

/** Step 1's candidates: their bucket beside the id, and only while the queue is limited. */
export const THROTTLE_WINDOW = {
  columns: `id, priority, available_at,
           CASE WHEN (SELECT per_key FROM settings) THEN coalesce(concurrency_key, '') ELSE '' END AS bucket`,
  conditions: [
    ...CLAIMABLE.flatMap((condition) =>
      condition === 'waiting_parents = 0'
        ? [
            "-- A flow child waits for its parents here as in every claim (and jobs_claimable_idx's",
            '-- predicate then serves this scan too).',
            condition,
          ]
        : [condition],
    ),
    'EXISTS (SELECT 1 FROM settings)',
  ],
} as const;

/** Steps 2 to 6: the limiter lock, the clock, the window's usage and the free slots, the debit, `chosen`. */
export function throttleCountCtes(s: string): string[] {
  return [
    `lim AS (
    SELECT r.claimed_total
    FROM ${s}.rate_limits AS r
    WHERE r.queue_name = $1 AND EXISTS (SELECT 1 FROM candidate)
    FOR UPDATE
  )`,
    `clock AS (
    SELECT clock_timestamp() AS at FROM lim
  )`,
    `usage AS (
    SELECT k.bucket_key, sum(e.n)::int AS used, min(e.at) AS oldest
    FROM ${s}.rate_limit_keys AS k
    CROSS JOIN LATERAL unnest(k.start_at, k.start_n) AS e(at, n)
    WHERE k.queue_name = $1
      AND (SELECT rate_max FROM settings) IS NOT NULL
      AND k.bucket_key IN (SELECT bucket FROM candidate)
      AND e.at > (SELECT at FROM clock) - (SELECT per FROM settings)
    GROUP BY k.bucket_key
  )`,
    `slots AS (
    SELECT CASE WHEN (SELECT conc_max FROM settings) IS NULL THEN NULL ELSE greatest(0,
             (SELECT conc_max FROM settings)
             - (SELECT count(*) FROM ${s}.jobs
                WHERE queue_name = $1 AND status = 'running' AND holds_queue_slot
                  AND lease_expires_at > now())
             - ((SELECT claimed_total FROM lim) - coalesce((SELECT claimed_total FROM seen), 0)))::int
           END AS free
  )`,
    `ranked AS (
    SELECT c.id, c.priority, c.available_at, c.bucket,
           row_number() OVER (PARTITION BY c.bucket ORDER BY c.priority DESC, c.available_at, c.id) AS rn,
           CASE WHEN (SELECT rate_max FROM settings) IS NULL THEN NULL
                ELSE greatest(0, (SELECT rate_max FROM settings) - coalesce(u.used, 0)) END AS room
    FROM candidate AS c
    LEFT JOIN usage AS u ON u.bucket_key = c.bucket
  )`,
    `eligible AS (
    SELECT * FROM ranked WHERE (room IS NULL OR rn <= room) AND EXISTS (SELECT 1 FROM lim)
  )`,
    `pre AS (
    SELECT id, bucket,
           row_number() OVER (PARTITION BY bucket ORDER BY priority DESC, available_at, id) AS rn
    FROM (
      SELECT * FROM eligible
      ORDER BY priority DESC, available_at, id
      LIMIT least($3, (SELECT free FROM slots))
    ) AS first
  )`,
    `debit AS (
    INSERT INTO ${s}.rate_limit_keys AS k (queue_name, bucket_key, start_at, start_n, granted)
    SELECT $1, w.bucket, ARRAY[(SELECT at FROM clock)], ARRAY[w.n], w.n
    FROM (SELECT bucket, count(*)::int AS n FROM pre GROUP BY bucket) AS w
    WHERE (SELECT rate_max FROM settings) IS NOT NULL
    ORDER BY w.bucket
    ON CONFLICT (queue_name, bucket_key) DO UPDATE
      SET (granted, start_at, start_n) = (
        SELECT g.n,
               t.ats || CASE WHEN g.n > 0 THEN excluded.start_at ELSE '{}'::timestamptz[] END,
               t.ns || CASE WHEN g.n > 0 THEN ARRAY[g.n] ELSE '{}'::integer[] END
        FROM (SELECT coalesce(array_agg(e.at ORDER BY e.o), '{}') AS ats,
                     coalesce(array_agg(e.n ORDER BY e.o), '{}') AS ns,
                     coalesce(sum(e.n), 0)::int AS used
              FROM unnest(k.start_at, k.start_n) WITH ORDINALITY AS e(at, n, o)
              WHERE e.at > excluded.start_at[1] - (SELECT per FROM settings)) AS t
        CROSS JOIN LATERAL (
          SELECT least(excluded.granted, greatest(0, (SELECT rate_max FROM settings) - t.used)) AS n) AS g)
    RETURNING k.bucket_key, k.granted, k.start_at[1] AS oldest
  )`,
    `chosen AS (
    SELECT pre.id
    FROM pre
    LEFT JOIN debit AS d ON d.bucket_key = pre.bucket
    WHERE (SELECT rate_max FROM settings) IS NULL OR pre.rn <= d.granted
  )`,
  ];
}

/** Step 7, after the lease grant (`claimed`): what held the claim back, for how long, and the tally. */
export function throttleVerdictCtes(s: string, recheck: string): string[] {
  return [
    `-- Buckets that held back a job: out of starts in the snapshot, or found so by the debit.
  blocked AS (
    SELECT bucket FROM ranked WHERE rn > room
    UNION
    SELECT d.bucket_key FROM debit AS d
    JOIN (SELECT bucket, count(*) AS n FROM pre GROUP BY bucket) AS w ON w.bucket = d.bucket_key
    WHERE d.granted < w.n
  )`,
    `counts AS (
    SELECT (SELECT count(*) FROM chosen)::int AS got,
           CASE WHEN EXISTS (SELECT 1 FROM lim) THEN least($3, (SELECT count(*) FROM candidate)) ELSE 0 END::int
             AS wanted,
           least($3, (SELECT count(*) FROM eligible))::int AS rate_allows,
           (SELECT free FROM slots) AS free
  )`,
    `verdict AS (
    SELECT c.got, c.got < c.wanted AS throttled, clock.at,
           CASE WHEN c.got >= c.wanted THEN NULL
                WHEN c.free IS NOT NULL AND c.free < c.rate_allows THEN 'concurrency'
                ELSE 'rate' END AS reason,
           clock.at + CASE
             WHEN c.got >= c.wanted THEN interval '0'
             WHEN c.free IS NOT NULL AND c.free < c.rate_allows THEN least(
               ${recheck}::double precision * interval '1 millisecond',
               (SELECT min(lease_expires_at) FROM ${s}.jobs
                WHERE queue_name = $1 AND status = 'running' AND holds_queue_slot
                  AND lease_expires_at > now()) - clock.at)
             ELSE coalesce(
               (SELECT min(coalesce(d.oldest, u.oldest)) FROM blocked AS b
                LEFT JOIN debit AS d ON d.bucket_key = b.bucket
                LEFT JOIN usage AS u ON u.bucket_key = b.bucket) + (SELECT per FROM settings) - clock.at,
               ${recheck}::double precision * interval '1 millisecond')
           END AS until
    FROM counts AS c LEFT JOIN clock ON true
  )`,
    `tally AS (
    UPDATE ${s}.rate_limits AS r
    SET claimed_total = r.claimed_total + v.got,
        throttled_claims = r.throttled_claims + CASE WHEN v.throttled THEN 1 ELSE 0 END,
        throttled_ms = r.throttled_ms + CASE WHEN v.throttled
          THEN greatest(0, extract(epoch FROM v.until - greatest(r.throttled_until, v.at)) * 1000)
          ELSE 0 END,
        throttled_until = CASE WHEN v.throttled THEN greatest(r.throttled_until, v.until)
                               ELSE r.throttled_until END
    FROM verdict AS v
    WHERE r.queue_name = $1 AND (v.got > 0 OR v.throttled)
    RETURNING r.queue_name
  )`,
  ];
}

/**
 * The throttled claim's answer: the claimed jobs, then one row with a null id and the verdict
 * (wait_ms, throttled_by), present while the queue is limited (`settings` has its row).
 */
export const THROTTLE_ANSWER = `SELECT ${CLAIMED_COLUMNS.join(', ')},
         ${CLAIMED_COMPUTED.join(', ')}, NULL::float8 AS wait_ms, NULL::text AS throttled_by
  FROM claimed
  UNION ALL
  SELECT ${[...CLAIMED_COLUMNS, ...CLAIMED_COMPUTED].map(() => 'NULL').join(', ')},
         CASE WHEN v.throttled
              THEN greatest(1, extract(epoch FROM v.until - clock_timestamp()) * 1000)::float8 END,
         v.reason
  FROM verdict AS v
  WHERE EXISTS (SELECT 1 FROM settings)`;
