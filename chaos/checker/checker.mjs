// The checker: after healing and draining, reads the ledger (chaos.*) and the jobs' history
// (leasehold.jobs, finished_jobs, job_events, lease_refusals) and measures what the promise is
// about. Every time it compares is database time; a run's end is its start plus its duration on
// the worker's monotonic clock (or, for a worker killed mid-run, the kill).
//
// The promise checked: at-least-once execution; at most one accepted completion per claim; a stale
// worker's writes refused and counted; duplicate execution only after a lease expired, overlapping
// for at most the lease plus the sweep interval; exactly-once effects for writes made in the
// completion transaction or through the effects ledger.

// Faults that can legitimately make a lease lapse, and for whom. A short pause, a pinned
// transaction and a skewed clock must not: an expiry they alone explain is a false expiry.
// 'partition' is the many-hosts harness's link cut (chaos/hosts.mjs), 'failover' the failover
// rig's killed primary (chaos/failover.mjs).
const EXPIRY_FAULTS = [
  'kill',
  'pause',
  'block',
  'terminate',
  'restart',
  'exhaustion',
  'sweeps',
  'partition',
  'failover',
];

/** Reads every measure; `settings` carries leaseMs, recoveryIntervalMs, toleranceMs. */
export async function check(db, settings) {
  await createViews(db);
  const one = async (sql, values = []) => (await db.query(sql, values)).rows[0];
  const all = async (sql, values = []) => (await db.query(sql, values)).rows;
  const { leaseMs, recoveryIntervalMs, toleranceMs } = settings;
  const overlapBoundMs = leaseMs + recoveryIntervalMs * 1.25 + toleranceMs;
  const renewalMs = leaseMs / 3;

  const jobs = await one(`
    SELECT count(*)::int AS acked,
      count(*) FILTER (WHERE f.id IS NOT NULL)::int AS succeeded,
      count(*) FILTER (WHERE j.status = 'dead')::int AS dead,
      count(*) FILTER (WHERE j.status IN ('pending', 'running'))::int AS stuck,
      count(*) FILTER (WHERE f.id IS NULL AND j.id IS NULL)::int AS vanished,
      count(*) FILTER (WHERE j.status NOT IN ('pending', 'running', 'dead'))::int AS other
    FROM chaos.acked a
    LEFT JOIN leasehold.finished_jobs f ON f.id = a.job_id
    LEFT JOIN leasehold.jobs j ON j.id = a.job_id`);
  const unacked = await one(`
    SELECT (SELECT count(*) FROM leasehold.finished_jobs f WHERE NOT EXISTS (SELECT 1 FROM chaos.acked a WHERE a.job_id = f.id))
         + (SELECT count(*) FROM leasehold.jobs j WHERE NOT EXISTS (SELECT 1 FROM chaos.acked a WHERE a.job_id = j.id)) AS n`);

  const stale = await one(`
    SELECT
      count(*) FILTER (WHERE EXISTS (
        SELECT 1 FROM chaos.runs r WHERE r.job_id = f.id AND r.token > f.lease_token)) AS later_claim_ran,
      count(*) FILTER (WHERE EXISTS (
        SELECT 1 FROM leasehold.job_events e WHERE e.job_id = f.id AND e.lease_token = f.lease_token
          AND e.kind IN ('lease_expired', 'retried', 'dead', 'snoozed', 'skipped', 'cancelled'))) AS claim_already_ended,
      count(*) FILTER (WHERE NOT EXISTS (
        SELECT 1 FROM chaos.runs r WHERE r.job_id = f.id AND r.token = f.lease_token AND r.owner = f.lease_owner)) AS no_run
    FROM leasehold.finished_jobs f`);

  const acks = await one(`
    WITH completed AS (SELECT * FROM chaos.acks WHERE result = 'completed')
    SELECT
      coalesce((SELECT max(n) FROM (SELECT count(*) AS n FROM completed GROUP BY job_id, token) c), 0)::int AS max_per_claim,
      (SELECT count(*) FROM (SELECT job_id FROM completed GROUP BY job_id HAVING count(*) > 1) d)::int AS jobs_twice,
      (SELECT count(*) FROM completed c JOIN leasehold.finished_jobs f ON f.id = c.job_id
        WHERE f.lease_token <> c.token OR f.lease_owner <> c.owner)::int AS mismatched,
      (SELECT count(*) FROM completed c WHERE NOT EXISTS (SELECT 1 FROM leasehold.finished_jobs f WHERE f.id = c.job_id))::int AS unfinished,
      (SELECT count(*) FROM completed)::int AS completed,
      (SELECT count(*) FROM chaos.acks WHERE result = 'lost')::int AS lost_answers`);

  const runs = await one(`
    SELECT count(*)::int AS runs,
      count(DISTINCT job_id)::int AS jobs_run,
      count(*) FILTER (WHERE end_unknown)::int AS end_unknown,
      count(*) FILTER (WHERE attempt > max_attempts)::int AS beyond_max
    FROM chaos.executions`);
  const beyondMax = await one(`
    SELECT (SELECT count(*) FROM leasehold.finished_jobs WHERE attempt_count > max_attempts)
         + (SELECT count(*) FROM leasehold.jobs WHERE attempt_count > max_attempts) AS n`);

  // Runs after an earlier run of the same job, by how the earlier run's claim ended.
  const reruns = await one(`
    WITH ordered AS (
      SELECT x.*, lag(token) OVER w AS prev_token, lag(outcome) OVER w AS prev_outcome
      FROM chaos.executions x WINDOW w AS (PARTITION BY job_id ORDER BY token)
    ),
    classified AS (
      SELECT o.*, (SELECT e.kind FROM leasehold.job_events e
                   WHERE e.job_id = o.job_id AND e.lease_token = o.prev_token
                     AND e.kind IN ('lease_expired', 'retried', 'snoozed', 'skipped', 'cancelled', 'dead')
                   ORDER BY e.id LIMIT 1) AS prev_end
      FROM ordered o WHERE o.prev_token IS NOT NULL
    )
    SELECT count(*)::int AS reruns,
      count(*) FILTER (WHERE prev_end = 'lease_expired')::int AS after_expiry,
      count(*) FILTER (WHERE prev_end = 'retried')::int AS after_failure,
      count(*) FILTER (WHERE prev_end IS NOT NULL AND prev_end NOT IN ('lease_expired', 'retried'))::int AS after_other,
      count(*) FILTER (WHERE prev_end IS NULL)::int AS unexplained,
      count(*) FILTER (WHERE prev_outcome = 'returned')::int AS duplicates,
      count(*) FILTER (WHERE prev_outcome = 'returned' AND prev_end = 'lease_expired')::int AS duplicates_after_expiry,
      count(*) FILTER (WHERE prev_outcome = 'returned' AND prev_end IS DISTINCT FROM 'lease_expired')::int AS duplicates_unexplained
    FROM classified`);

  // Two runs of one job overlap while both were executing. A process stopped by SIGSTOP executes
  // nothing: the time its pause (or short pause) covers is taken out of the overlap, and the raw
  // overlap, frozen time included, is reported beside it.
  const overlap = await one(
    `
    WITH pairs AS (
      SELECT a.job_id, split_part(a.owner, '-', 1) AS la, split_part(b.owner, '-', 1) AS lb,
        greatest(a.started_at, b.started_at) AS lo, least(a.ended_at, b.ended_at) AS hi
      FROM chaos.executions a
      JOIN chaos.executions b ON b.job_id = a.job_id AND b.token > a.token
      WHERE a.ended_at IS NOT NULL AND b.ended_at IS NOT NULL
    ),
    measured AS (
      SELECT p.*, extract(epoch FROM p.hi - p.lo) * 1000 AS raw_ms,
        coalesce((SELECT sum(greatest(0, extract(epoch FROM least(p.hi, f.healed_at) - greatest(p.lo, f.injected_at)) * 1000))
                  FROM chaos.faults f
                  WHERE f.kind IN ('pause', 'short-pause') AND f.target IN (p.la, p.lb)), 0) AS frozen_ms
      FROM pairs p WHERE p.hi > p.lo
    )
    SELECT count(*) FILTER (WHERE raw_ms - frozen_ms > 0)::int AS overlapping,
      coalesce(max(raw_ms - frozen_ms), 0)::float8 AS longest_ms,
      coalesce(max(raw_ms), 0)::float8 AS longest_raw_ms,
      count(*) FILTER (WHERE raw_ms - frozen_ms > $1)::int AS beyond_bound
    FROM measured`,
    [overlapBoundMs],
  );
  // The pairs beyond the bound, worst first, with what the earlier run was doing: its outcome, its
  // job's mode, and how its claim ended on the database (a lease expiry, and when). What explains an
  // overlap (a handler blocked in a statement, a claim or renewal lost with a primary) is read here.
  const overlapSamples = await all(
    `
    WITH pairs AS (
      SELECT a.job_id, a.token AS a_token, a.owner AS a_owner, a.outcome AS a_outcome,
        a.queue AS a_queue, a.started_at AS a_started_at, a.ended_at AS a_ended_at, a.duration_ms AS a_duration_ms,
        b.token AS b_token, b.owner AS b_owner, b.started_at AS b_started_at, b.ended_at AS b_ended_at,
        extract(epoch FROM least(a.ended_at, b.ended_at) - greatest(a.started_at, b.started_at)) * 1000 AS raw_ms
      FROM chaos.executions a
      JOIN chaos.executions b ON b.job_id = a.job_id AND b.token > a.token
      WHERE a.ended_at IS NOT NULL AND b.ended_at IS NOT NULL
    )
    SELECT p.*, coalesce((SELECT a.mode FROM chaos.acked a WHERE a.job_id = p.job_id), j.payload->>'mode') AS mode,
      (SELECT e.kind FROM leasehold.job_events e WHERE e.job_id = p.job_id AND e.lease_token = p.a_token
        AND e.kind <> 'refused' ORDER BY e.id LIMIT 1) AS a_claim_ended_by,
      (SELECT e.at FROM leasehold.job_events e WHERE e.job_id = p.job_id AND e.lease_token = p.a_token
        AND e.kind <> 'refused' ORDER BY e.id LIMIT 1) AS a_claim_ended_at
    FROM pairs p
    LEFT JOIN leasehold.jobs j ON j.id = p.job_id
    WHERE p.raw_ms > $1
    ORDER BY p.raw_ms DESC LIMIT 10`,
    [overlapBoundMs],
  );

  const recovery = await one(`
    SELECT (SELECT count(*) FROM leasehold.job_events WHERE kind = 'lease_expired')::int AS expiries,
      (SELECT count(*) FROM (SELECT 1 FROM leasehold.job_events WHERE kind = 'lease_expired'
         GROUP BY job_id, lease_token HAVING count(*) > 1) d)::int AS double_recoveries`);

  const falseExpiries = await all(
    `
    SELECT e.job_id, e.lease_owner, e.claimed_at, e.at
    FROM leasehold.job_events e
    WHERE e.kind = 'lease_expired'
      AND NOT EXISTS (
        SELECT 1 FROM chaos.faults f
        WHERE f.kind = ANY($1)
          AND (f.target = 'all' OR f.target = split_part(e.lease_owner, '-', 1))
          AND f.injected_at <= e.at
          -- After a link cut, a connection resumes only when its retransmission timer (doubled
          -- at each unanswered try during the cut) fires again: up to about the cut's length later.
          AND e.claimed_at <= f.healed_at + interval '1 second'
            + CASE WHEN f.kind = 'partition' THEN (f.detail->>'cutMs')::int * interval '1 millisecond'
                   ELSE interval '0' END)
    ORDER BY e.at LIMIT 20`,
    [EXPIRY_FAULTS],
  );

  const early = await one(`
    SELECT count(*)::int AS n,
      count(*) FILTER (WHERE split_part(r.owner, '-', 1) = ANY (
        SELECT string_to_table(target, ',') FROM chaos.faults WHERE kind = 'skew'))::int AS by_skewed,
      (SELECT count(*) FROM chaos.executions x JOIN chaos.acked a ON a.job_id = x.job_id WHERE a.delay_ms > 0)::int AS delayed_runs
    FROM chaos.executions r
    JOIN chaos.acked a ON a.job_id = r.job_id AND a.delay_ms > 0
    JOIN LATERAL (SELECT coalesce(
      (SELECT created_at FROM leasehold.finished_jobs WHERE id = r.job_id),
      (SELECT created_at FROM leasehold.jobs WHERE id = r.job_id)) AS created_at) c ON true
    WHERE r.started_at < c.created_at + a.delay_ms * interval '1 millisecond'`);

  // The early runs themselves (a handful at most), for the JSON: how early, and by whom.
  const earlySamples = await all(`
    SELECT r.job_id, r.token, r.owner, r.started_at, c.created_at, a.delay_ms,
      extract(epoch FROM c.created_at + a.delay_ms * interval '1 millisecond' - r.started_at) * 1000 AS early_ms
    FROM chaos.executions r
    JOIN chaos.acked a ON a.job_id = r.job_id AND a.delay_ms > 0
    JOIN LATERAL (SELECT coalesce(
      (SELECT created_at FROM leasehold.finished_jobs WHERE id = r.job_id),
      (SELECT created_at FROM leasehold.jobs WHERE id = r.job_id)) AS created_at) c ON true
    WHERE r.started_at < c.created_at + a.delay_ms * interval '1 millisecond'
    ORDER BY r.started_at LIMIT 10`);

  const skewed = await one(`
    SELECT count(*)::int AS runs,
      (SELECT count(*) FROM leasehold.finished_jobs f WHERE split_part(f.lease_owner, '-', 1) = ANY (
         SELECT string_to_table(target, ',') FROM chaos.faults WHERE kind = 'skew'))::int AS completed
    FROM chaos.executions r
    WHERE split_part(r.owner, '-', 1) = ANY (SELECT string_to_table(target, ',') FROM chaos.faults WHERE kind = 'skew')`);

  // After SIGCONT, how long the paused worker's runs went on (must be within one renewal interval),
  // and its writes refused after it resumed.
  const pauses = await all(
    `
    SELECT f.id, f.kind, f.target,
      (SELECT max(extract(epoch FROM x.ended_at - f.healed_at) * 1000) FROM chaos.executions x
        WHERE split_part(x.owner, '-', 1) = f.target AND x.started_at < f.injected_at AND x.ended_at > f.injected_at) AS lag_ms,
      (SELECT count(*) FROM chaos.executions x
        WHERE split_part(x.owner, '-', 1) = f.target AND x.started_at < f.injected_at
          AND (x.ended_at IS NULL OR x.ended_at > f.injected_at))::int AS in_flight,
      (SELECT count(*) FROM leasehold.job_events e WHERE e.kind = 'refused'
        AND split_part(e.lease_owner, '-', 1) = f.target AND e.at >= f.healed_at)::int AS refused_after,
      (SELECT count(*) FROM leasehold.job_events e WHERE e.kind = 'lease_expired'
        AND split_part(e.lease_owner, '-', 1) = f.target AND e.at >= f.injected_at
        AND e.at <= f.healed_at + $1 * interval '1 millisecond')::int AS expired
    FROM chaos.faults f WHERE f.kind IN ('pause', 'short-pause') ORDER BY f.id`,
    [leaseMs],
  );

  // Grouped joins, not correlated subqueries: a full run has 100,000 jobs and as many downstream calls.
  const effects = await one(`
    WITH calls AS (
      SELECT job_id, count(*) FILTER (WHERE kind = 'effect') AS effect_calls,
             count(*) FILTER (WHERE kind = 'plain') AS plain_calls
      FROM chaos.downstream_calls GROUP BY job_id
    ),
    txn_writes AS (
      SELECT t.job_id, count(*) AS n, count(*) FILTER (WHERE t.token = f.lease_token) AS same_claim
      FROM chaos.txn_effects t LEFT JOIN leasehold.finished_jobs f ON f.id = t.job_id GROUP BY t.job_id
    ),
    bumps AS (
      SELECT c.job_id, c.n, (c.token = f.lease_token) AS same_claim, f.id IS NULL AS orphan
      FROM chaos.counters c LEFT JOIN leasehold.finished_jobs f ON f.id = c.job_id
    ),
    done AS (
      SELECT f.id, a.mode, coalesce(b.n, 0) AS bumps, coalesce(b.same_claim, false) AS bump_same, coalesce(c.effect_calls, 0) AS effect_calls, coalesce(c.plain_calls, 0) AS plain_calls,
             coalesce(t.n, 0) AS txn_n, coalesce(t.same_claim, 0) AS txn_same, d.job_id IS NOT NULL AS applied
      FROM leasehold.finished_jobs f
      JOIN chaos.acked a ON a.job_id = f.id
      LEFT JOIN calls c ON c.job_id = f.id
      LEFT JOIN txn_writes t ON t.job_id = f.id
      LEFT JOIN bumps b ON b.job_id = f.id
      LEFT JOIN (SELECT DISTINCT job_id FROM chaos.downstream_applied) d ON d.job_id = f.id
    )
    SELECT count(*) FILTER (WHERE mode = 'txn')::int AS txn_jobs,
      count(*) FILTER (WHERE mode = 'txn' AND (txn_n <> 1 OR txn_same <> 1))::int AS txn_not_once,
      (SELECT count(*) FROM txn_writes t WHERE NOT EXISTS (
         SELECT 1 FROM leasehold.finished_jobs f WHERE f.id = t.job_id))::int AS txn_orphans,
      count(*) FILTER (WHERE mode = 'counter')::int AS counter_jobs,
      -- A job whose enqueue answer a fault lost is not in chaos.acked, so its mode is unknown here
      -- (finished_jobs keeps no payload): its counter row is held to exactly once on its own, and
      -- the total is compared over acknowledged jobs only.
      (count(*) FILTER (WHERE mode = 'counter' AND (bumps <> 1 OR NOT bump_same))
        + (SELECT count(*) FROM bumps b WHERE NOT b.orphan AND (b.n <> 1 OR NOT b.same_claim)
             AND NOT EXISTS (SELECT 1 FROM chaos.acked a WHERE a.job_id = b.job_id)))::int AS counter_not_once,
      (SELECT coalesce(sum(n), 0) FROM bumps b
        WHERE EXISTS (SELECT 1 FROM chaos.acked a WHERE a.job_id = b.job_id))::int AS counter_total,
      (SELECT count(*) FROM bumps WHERE orphan)::int AS counter_orphans,
      count(*) FILTER (WHERE mode = 'effect')::int AS ledger_jobs,
      count(*) FILTER (WHERE mode = 'effect' AND effect_calls <> 1)::int AS ledger_not_once,
      count(*) FILTER (WHERE mode = 'plain')::int AS plain_jobs,
      count(*) FILTER (WHERE mode = 'plain' AND plain_calls = 0)::int AS plain_never_called,
      coalesce(sum(plain_calls - 1) FILTER (WHERE mode = 'plain' AND plain_calls > 1), 0)::int AS plain_repeat_calls,
      count(*) FILTER (WHERE mode = 'plain' AND NOT applied)::int AS plain_not_applied
    FROM done`);

  // The effects-ledger jobs whose downstream was called other than once (a handful at most), for the
  // JSON: each call (claim, owner, time) beside the job's history and the claim that completed it,
  // so a break can be traced.
  const ledgerSamples = await all(`
    WITH odd AS (
      SELECT a.job_id
      FROM chaos.acked a
      LEFT JOIN chaos.downstream_calls c ON c.job_id = a.job_id AND c.kind = 'effect'
      WHERE a.mode = 'effect'
      GROUP BY a.job_id
      HAVING count(c.job_id) <> 1
      ORDER BY a.job_id
      LIMIT 5
    )
    SELECT o.job_id,
      (SELECT json_agg(json_build_object('token', c.token, 'owner', c.owner, 'claim_id', c.claim_id, 'at', c.at)
                       ORDER BY c.at)
       FROM chaos.downstream_calls c WHERE c.job_id = o.job_id AND c.kind = 'effect') AS calls,
      coalesce((SELECT json_agg(json_build_object('kind', e.kind, 'token', e.lease_token, 'owner', e.lease_owner, 'at', e.at)
                                ORDER BY e.id)
                FROM leasehold.job_events e WHERE e.job_id = o.job_id), '[]') AS events,
      (SELECT json_build_object('token', f.lease_token, 'owner', f.lease_owner, 'at', f.finished_at)
       FROM leasehold.finished_jobs f WHERE f.id = o.job_id) AS completed_by
    FROM odd o
    ORDER BY o.job_id`);

  // Two different jobs (two enqueues: two producer references) that called the downstream with one
  // idempotency key: a downstream deduplicating by key kept the first job's effect and silently
  // dropped the second's. A failover that reissued an id, with keys made of the id alone, does this.
  const sharedKeys = await one(`
    SELECT count(*)::int AS keys, coalesce(sum(jobs), 0)::int AS jobs,
      (array_agg(key ORDER BY key))[1:3] AS samples
    FROM (SELECT key, count(DISTINCT job_ref) AS jobs FROM chaos.downstream_calls
          WHERE job_ref IS NOT NULL GROUP BY key HAVING count(DISTINCT job_ref) > 1) shared`);

  const refusals = await all(`
    SELECT operation, sum(refused_count)::int AS n FROM leasehold.lease_refusals GROUP BY operation ORDER BY operation`);

  // A block starts with the target's next handler, not when it was asked for: measured from then.
  // Only the Leasehold worker's jobs count: hand-completed retries are slow on purpose.
  const recoveryTimes = await all(
    `
    WITH eff AS (
      SELECT f.*, CASE WHEN f.kind = 'block' THEN coalesce(
        (SELECT min(x.started_at) FROM chaos.executions x
         WHERE x.outcome LIKE 'blocked%' AND split_part(x.owner, '-', 1) = f.target AND x.started_at >= f.injected_at),
        f.injected_at) ELSE f.injected_at END AS t0
      FROM chaos.faults f WHERE NOT (f.kind = ANY ($1))
    )
    SELECT f.id, f.kind, f.target,
      extract(epoch FROM f.healed_at - f.injected_at) * 1000 AS fault_ms,
      s.stranded, s.unfinished,
      greatest(0, extract(epoch FROM s.last_released - f.t0) * 1000) AS released_ms,
      greatest(0, extract(epoch FROM s.last_finished - f.t0) * 1000) AS recovery_ms,
      extract(epoch FROM (SELECT min(finished_at) FROM leasehold.finished_jobs WHERE finished_at > f.healed_at) - f.healed_at) * 1000 AS resumed_ms
    FROM eff f
    CROSS JOIN LATERAL (
      SELECT count(DISTINCT x.job_id)::int AS stranded,
        count(DISTINCT x.job_id) FILTER (WHERE fj.id IS NULL)::int AS unfinished,
        max(fj.finished_at) AS last_finished,
        -- When the stranded claim was resolved: completed, or ended by a failure or an expiry.
        max(coalesce(
          CASE WHEN fj.lease_token = x.token THEN fj.finished_at END,
          (SELECT min(e.at) FROM leasehold.job_events e
           WHERE e.job_id = x.job_id AND e.lease_token = x.token AND e.kind <> 'refused'))) AS last_released
      FROM chaos.executions x
      LEFT JOIN leasehold.finished_jobs fj ON fj.id = x.job_id
      WHERE x.started_at <= f.t0 AND (x.ended_at IS NULL OR x.ended_at >= f.t0)
        AND (f.target = 'all' OR split_part(x.owner, '-', 1) = f.target)
        AND x.queue = 'chaos'
    ) s
    ORDER BY f.id`,
    [['skew', 'pin']],
  );

  const throughput = await all(`
    SELECT f.id, f.kind,
      (SELECT count(*) FROM leasehold.finished_jobs j WHERE j.finished_at BETWEEN f.injected_at AND f.healed_at)::int AS done_during,
      extract(epoch FROM f.healed_at - f.injected_at) AS seconds
    FROM chaos.faults f WHERE f.kind = 'pin'`);
  const span = await one(`
    SELECT extract(epoch FROM max(finished_at) - min(finished_at)) AS seconds, count(*)::int AS n FROM leasehold.finished_jobs`);
  const faults = await all(
    'SELECT id, kind, target, injected_at, healed_at, detail FROM chaos.faults ORDER BY id',
  );

  return {
    settings: { ...settings, overlapBoundMs, renewalMs },
    jobs: { ...jobs, unacknowledgedPresent: Number(unacked.n) },
    stale: mapInts(stale),
    acks,
    runs: { ...runs, beyondMax: runs.beyond_max + Number(beyondMax.n) },
    reruns,
    overlap: { ...overlap, samples: overlapSamples },
    recovery: {
      ...recovery,
      falseExpiries: falseExpiries.length,
      falseExpirySamples: falseExpiries.slice(0, 5),
    },
    early: { ...early, samples: earlySamples },
    skewed,
    pauses,
    effects: { ...effects, ledgerSamples },
    sharedKeys,
    refusals,
    recoveryTimes,
    pinThroughput: throughput.map((t) => ({ ...t, rate: t.seconds > 0 ? t.done_during / t.seconds : null })),
    overallRate: span.seconds > 0 ? span.n / span.seconds : null,
    faults,
  };
}

// Materialised once (and indexed): every measure below reads it, some twice in a self-join.
async function createViews(db) {
  // A run's end: its start plus its measured duration; for a run of a process killed before its end
  // record was written, the kill (database time read just after SIGKILL was sent; a start row that
  // committed after it belongs to a run that did nothing). Unknown only when neither exists. A start whose commit was not
  // confirmed (the connection died at commit) has a zero-length end: its handler gave up at once.
  await db.query(`
    DROP TABLE IF EXISTS chaos.executions;
    CREATE TABLE chaos.executions AS
    SELECT r.job_id, r.token, r.owner, r.queue, r.attempt, r.max_attempts, r.started_at,
      e.duration_ms, e.outcome,
      coalesce(r.started_at + e.duration_ms * interval '1 millisecond', k.killed_at) AS ended_at,
      (e.job_id IS NULL AND k.killed_at IS NULL) AS end_unknown
    FROM chaos.runs r
    LEFT JOIN LATERAL (
      SELECT * FROM chaos.run_ends e
      WHERE e.job_id = r.job_id AND e.token = r.token AND e.owner = r.owner
      LIMIT 1) e ON true
    LEFT JOIN LATERAL (
      SELECT greatest(r.started_at, coalesce((f.detail->>'killedAt')::timestamptz, f.healed_at)) AS killed_at
      FROM chaos.faults f
      WHERE f.kind IN ('kill', 'sweeps') AND f.target = split_part(r.owner, '-', 1) AND f.healed_at >= r.started_at
      ORDER BY f.injected_at LIMIT 1) k ON e.job_id IS NULL;
    CREATE INDEX ON chaos.executions (job_id, token);
    ANALYZE chaos.executions, chaos.acked, chaos.faults, chaos.acks, chaos.downstream_calls, chaos.txn_effects, chaos.counters;`);
}

function mapInts(row) {
  return Object.fromEntries(Object.entries(row).map(([key, value]) => [key, Number(value)]));
}
