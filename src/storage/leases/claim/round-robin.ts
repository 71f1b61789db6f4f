/**
 * The round-robin fragments (composed in ../claim.ts): a claim of a queue with `fairness` set
 * (022) takes turns between fairness keys instead of preference order. Only such a queue claims
 * through them (the claim router reads `fairness` with the other settings), so the plain claim is
 * untouched.
 *
 * 1. `turn` yields the queue's cursor (the key served last) only when the queue is round-robin and
 *    not paused: otherwise nothing below runs and the claim is empty.
 * 2. `top` finds the highest priority of a claimable job (jobs_claimable_idx, SKIP LOCKED, so a
 *    priority whose jobs peers are claiming right now is passed over): fair within a priority.
 * 3. `after_turn` walks the distinct keys with work at that priority after the cursor, and
 *    `wrapped` from the first key up to the cursor: a skip scan of jobs_fairness_idx, one probe
 *    per key, at most as many keys as the claim takes. A key's backlog is never read, however long.
 * 4. Each key's oldest jobs (a LATERAL per key: an index range on (queue, priority, key,
 *    available_at), SKIP LOCKED), at most ceil(limit / keys) each. Jobs without a key take one
 *    turn together, found among the first `limit` claimable jobs of that priority in preference
 *    order (they have no index of their own: plain jobs must not pay for one).
 * 5. `candidate` takes the first `limit` by round, then turn: each key's first job, then each key's
 *    second, and so on. A key with 100,000 jobs waiting delays another key's job by at most one
 *    round of the keys with work.
 * 6. After the lease grant, `advanced` (turnCursorCtes) moves the cursor to the last key this
 *    claim served, in the same statement, unless another claim holds the cursor row (SKIP LOCKED):
 *    no claim waits for another. A claim that came back short (a key with fewer jobs than its
 *    share, or a priority running out) tells its caller to claim again at once. Each row carries
 *    its place in the turns (`turn`): the caller sorts by it, and a worker starts them in that order.
 */
import { MAX_BATCH } from '../../../shared/validation.js';
import { CLAIMABLE, candidateWindow, where } from './fragments.js';

/** The largest claim (MAX_BATCH), so the largest share of one key. */
const MAX_SHARE = MAX_BATCH;

/**
 * The claimable predicate of jobs_fairness_idx (022), repeated so that every probe can use it, and
 * in its words (`IS FALSE`), so that none can use jobs_claimable_idx instead (see 022).
 */
const FAIR_ROWS = `queue_name = $1
        AND status = 'pending'
        AND awaits_predecessor IS FALSE
        AND waiting_parents = 0
        AND fairness_key IS NOT NULL
        AND priority = (SELECT priority FROM top)`;

/**
 * The next key with work at the top priority after `after` (and at most `upTo`), if any, and
 * whether it is due (its oldest job, the first index entry of the key, is claimable now): one
 * index probe. A key whose jobs all wait for their time (a retry backing off) is walked past.
 */
const nextKey = (s: string, after: string, upTo?: string) => `(
        SELECT fairness_key, available_at <= now() FROM ${s}.jobs
        WHERE ${FAIR_ROWS}
          AND fairness_key > ${after}${upTo === undefined ? '' : `\n          AND fairness_key <= ${upTo}`}
        ORDER BY fairness_key, available_at
        LIMIT 1)`;

/** The most keys not yet due one claim walks past: a bound on its probes. */
const MAX_PASSED = 1000;

/**
 * The CTEs `turn` to `candidate` (steps 1 to 5 above): up to `limit` claimable jobs of queue $1,
 * locked, in turns between fairness keys, with their lane, key and `turn_order`, plus the columns
 * `extra` names. The statement that holds them is `WITH RECURSIVE`.
 */
export function turnCandidateCtes(s: string, limit: string, extra: readonly string[] = []): string {
  const cols = (prefix: string) => extra.map((column) => `, ${prefix}${column}`).join('');
  return `turn AS (
    SELECT t.last_key
    FROM ${s}.queues AS q
    LEFT JOIN ${s}.fair_turns AS t ON t.queue_name = q.name
    WHERE q.name = $1 AND q.fairness = 'round-robin' AND NOT q.paused
  ),
  ${candidateWindow(s, { columns: 'priority', conditions: [...CLAIMABLE, 'EXISTS (SELECT 1 FROM turn)'], limit: '1' }, 'top')},
  after_turn (key, pos, due, n_due) AS (
    SELECT first.key, 1, first.due, first.due::int
    FROM ${nextKey(s, `coalesce((SELECT last_key FROM turn), '')`)} AS first (key, due)
    UNION ALL
    SELECT following.key, w.pos + 1, following.due, w.n_due + following.due::int
    FROM after_turn AS w, LATERAL ${nextKey(s, 'w.key')} AS following (key, due)
    WHERE w.n_due < ${limit} AND w.pos < ${limit} + ${MAX_PASSED}
  ),
  wrapped (key, pos, due, n_due) AS (
    SELECT first.key, 1, first.due, first.due::int
    FROM ${nextKey(s, `''`, '(SELECT last_key FROM turn)')} AS first (key, due)
    WHERE (SELECT count(*) FILTER (WHERE due) FROM after_turn) < ${limit}
      AND (SELECT count(*) FROM after_turn) < ${limit} + ${MAX_PASSED}
    UNION ALL
    SELECT following.key, w.pos + 1, following.due, w.n_due + following.due::int
    FROM wrapped AS w, LATERAL ${nextKey(s, 'w.key', '(SELECT last_key FROM turn)')} AS following (key, due)
    WHERE w.n_due + (SELECT count(*) FILTER (WHERE due) FROM after_turn) < ${limit}
      AND w.pos + (SELECT count(*) FROM after_turn) < ${limit} + ${MAX_PASSED}
  ),
  walked AS (
    SELECT key, pos, due FROM after_turn
    UNION ALL
    SELECT key, pos + (SELECT count(*) FROM after_turn), due FROM wrapped
  ),
  keys AS (
    SELECT key, pos FROM walked WHERE due
  ),
  -- Where the next claim starts when this one serves no key (every key it walked was not due, or
  -- its due jobs were all held by peers): after the last key walked, so that it never stalls.
  walked_last AS (
    SELECT key FROM walked ORDER BY pos DESC LIMIT 1
  ),
  front AS (
    SELECT id
    FROM (
      SELECT id, fairness_key
      FROM ${s}.jobs
${where([...CLAIMABLE, 'priority = (SELECT priority FROM top)'], '      ')}
      ORDER BY available_at, id
      LIMIT ${limit}
    ) AS head_rows
    WHERE fairness_key IS NULL
  ),
  share AS (
    SELECT ceil(${limit}::numeric / greatest(1, (SELECT count(*) FROM keys)
                                          + (SELECT least(count(*), 1) FROM front)))::int AS n
  ),
  keyless AS (
    SELECT id, lane, available_at${cols('')}
    FROM ${s}.jobs
    WHERE queue_name = $1
      AND id = ANY (ARRAY(SELECT id FROM front))
      AND status = 'pending'
      AND NOT awaits_predecessor
      AND waiting_parents = 0
      AND fairness_key IS NULL
    ORDER BY available_at, id
    LIMIT (SELECT n FROM share)
    FOR UPDATE SKIP LOCKED
  ),
  picked AS (
    SELECT c.id, c.lane, k.key, k.pos, c.available_at${cols('c.')}
    FROM keys AS k
    CROSS JOIN LATERAL (
      SELECT * FROM (
        SELECT id, lane, available_at${cols('')}
        FROM ${s}.jobs
        WHERE ${FAIR_ROWS}
          AND fairness_key = k.key
          AND available_at <= now()
        -- The fairness index's own order (priority and key are fixed here): the claimable index,
        -- also ordered by available_at within a priority, would walk other keys' rows.
        ORDER BY fairness_key, available_at, id
        LIMIT (SELECT n FROM share)
        FOR UPDATE SKIP LOCKED
      ) AS share_of_key
      -- A share is at most ${limit}, at most ${MAX_SHARE}: said as a constant, so that the planner does not
      -- take a tenth of the key's backlog for it, cost the statement past jit_above_cost and
      -- compile it (measured: 250 ms of JIT for a 1 ms claim over 100,000 jobs).
      LIMIT ${MAX_SHARE}
    ) AS c
    UNION ALL
    SELECT id, lane, NULL, (SELECT count(*) FROM keys) + 1, available_at${cols('')} FROM keyless
  ),
  candidate AS (
    SELECT id, lane, key, available_at${cols('')}, row_number() OVER (ORDER BY round, pos) AS turn_order
    FROM (
      SELECT id, lane, key, pos, available_at${cols('')},
             row_number() OVER (PARTITION BY pos ORDER BY available_at, id) AS round
      -- Never fewer than picked holds (at most $3 keys of ceil($3 / keys) each: under 2 * $3),
      -- but a constant the planner can count on (see the share's bound above).
      FROM (SELECT * FROM picked LIMIT ${2 * MAX_SHARE}) AS bounded
    ) AS rounds
    ORDER BY round, pos
    LIMIT ${limit}
  )`;
}

/**
 * Step 6: `cursor_row` and `advanced`, which move the queue's cursor to `served` (the last key
 * this claim served), or, when it served none, past the last key it walked (`walked_last`).
 */
export function turnCursorCtes(s: string, served: string): string[] {
  return [
    `cursor_row AS (
    SELECT queue_name FROM ${s}.fair_turns WHERE queue_name = $1 AND EXISTS (SELECT 1 FROM walked_last)
    FOR UPDATE SKIP LOCKED
  )`,
    `advanced AS (
    UPDATE ${s}.fair_turns AS t
    SET last_key = coalesce(
          ${served},
          (SELECT key FROM walked_last))
    FROM cursor_row
    WHERE t.queue_name = cursor_row.queue_name
  )`,
  ];
}

/** The last key a plain round-robin claim served, for `turnCursorCtes`. */
export const SERVED_BY_CANDIDATES =
  '(SELECT key FROM candidate WHERE key IS NOT NULL ORDER BY turn_order DESC LIMIT 1)';
/** The last key a round-robin claim within a per-key limit served (only `chosen` jobs count). */
export const SERVED_BY_CHOSEN = `(SELECT c.key FROM chosen JOIN candidate AS c USING (id)
           WHERE c.key IS NOT NULL ORDER BY c.turn_order DESC LIMIT 1)`;
