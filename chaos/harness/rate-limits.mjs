// The rate-limited-queue mode of the chaos run (--limited-jobs N): a backlog on queue
// `chaos_limited`, configured with a rate limit (at most --rate-max starts in any --rate-per-ms
// window) and a concurrency limit (--limited-concurrency live leases), served by every worker
// process beside the usual queues while the nemesis kills and pauses them. Independent of the rest
// of the harness: a Leasehold schema of its own (`limited`, so the main checker never sees these
// jobs), its own ledger tables (chaos.limited_runs, chaos.limited_ends), its own rules.
//
// The handlers never renew (renew: 'progress', and they report none), so every claim's lease is
// exactly [claimed_at, claimed_at + leaseMs) unless a transition ends it earlier: the live leases
// at any instant are known from the database alone, in database time.
//
// What is checked:
//   - starts: every claim of the queue (the jobs' history: finished_jobs, job_events, jobs), and
//     separately every run a handler started (its ledger row joined to its claim's claimed_at),
//     never more than max inside any half-open window [t, t + perMs); and, the backlog being
//     larger than the run, max was reached (the limit, not the load, set the pace).
//   - concurrency: at no instant more than the cap of live leases; and at no instant more than the
//     cap of handlers running, a handler counted from its start record until its end record or its
//     lease's end, whichever is first. A handler that outlives its lease (a paused worker) runs on
//     beside the next holder of its slot: that is the documented lease-expiry window, not counted.

/** The queue of this mode, and the Leasehold schema it lives in. */
export const LIMITED_QUEUE = 'chaos_limited';
export const LIMITED_SCHEMA = 'limited';

/** Enqueues the backlog and configures the limits (before any worker starts serving it). */
export async function prepareLimitedQueue(lh, { jobs, rateMax, ratePerMs, concurrency }) {
  await lh.configureQueue(LIMITED_QUEUE, {
    rateLimit: { max: rateMax, perMs: ratePerMs },
    concurrencyLimit: concurrency,
  });
  for (let done = 0; done < jobs; done += 1000) {
    const n = Math.min(1000, jobs - done);
    await lh.enqueueMany(
      LIMITED_QUEUE,
      Array.from({ length: n }, (_, i) => ({ payload: { workMs: 20 + ((done + i) % 7) * 15 } })),
    );
  }
}

/** Reads the queue's claims and its handlers' runs (times as epoch ms, database time). */
export async function readLimitedHistory(db, { leaseMs }) {
  const ms = (column) => `(extract(epoch FROM ${column}) * 1000)::float8`;
  const claims = await db.query(
    `WITH claims AS (
       SELECT id AS job_id, lease_token AS token, claimed_at, finished_at AS ended_at
       FROM limited.finished_jobs WHERE queue_name = $1
       UNION ALL
       SELECT job_id, lease_token, claimed_at,
              CASE WHEN kind = 'lease_expired' THEN NULL ELSE at END
       FROM limited.job_events
       WHERE queue_name = $1 AND claimed_at IS NOT NULL AND kind <> 'refused' AND kind <> 'replayed'
       UNION ALL
       SELECT id, lease_token, claimed_at, NULL FROM limited.jobs WHERE queue_name = $1 AND status = 'running'
     )
     SELECT job_id::text AS "jobId", token::text AS token, ${ms('claimed_at')} AS "claimedAt",
            ${ms(`least(coalesce(ended_at, 'infinity'), claimed_at + $2::double precision * interval '1 millisecond')`)} AS "releasedAt"
     FROM claims ORDER BY claimed_at`,
    [LIMITED_QUEUE, leaseMs],
  );
  const byClaim = new Map(claims.rows.map((c) => [`${c.jobId}:${c.token}`, c]));
  const runs = await db.query(
    `SELECT r.job_id::text AS "jobId", r.token::text AS token, ${ms('r.started_at')} AS "startedAt",
            ${ms('min(e.ended_at)')} AS "endedAt"
     FROM chaos.limited_runs AS r
     LEFT JOIN chaos.limited_ends AS e ON e.job_id = r.job_id AND e.token = r.token
     GROUP BY r.job_id, r.token, r.started_at`,
  );
  const unfinished = await db.query(`SELECT count(*)::int AS n FROM limited.jobs WHERE queue_name = $1`, [
    LIMITED_QUEUE,
  ]);
  return {
    unfinished: unfinished.rows[0].n,
    claims: claims.rows,
    runs: runs.rows.map((run) => {
      const claim = byClaim.get(`${run.jobId}:${run.token}`);
      return { ...run, claimedAt: claim?.claimedAt ?? null, releasedAt: claim?.releasedAt ?? null };
    }),
  };
}

/** The most times inside any half-open window [t, t + windowMs). */
export function busiestWindow(times, windowMs) {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let first = 0;
  for (let last = 0; last < sorted.length; last++) {
    while (sorted[last] - sorted[first] >= windowMs) first++;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

/** The most half-open intervals [from, to) covering one instant (ends before starts at a tie). */
export function mostAtOnce(intervals) {
  const edges = [];
  for (const { from, to } of intervals) {
    if (!(to > from)) continue;
    edges.push([from, 1], [to, -1]);
  }
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, step] of edges) {
    now += step;
    most = Math.max(most, now);
  }
  return most;
}

/** Measures the history against the limits. */
export function measureLimited(history, { rateMax, ratePerMs, concurrency }) {
  const { claims, runs } = history;
  const started = runs.filter((run) => run.claimedAt !== null);
  const handlerIntervals = started.map((run) => ({
    from: run.startedAt,
    // Until its end record, or its lease's end when it has none or outlived its lease.
    to: Math.min(run.endedAt ?? Number.POSITIVE_INFINITY, run.releasedAt),
  }));
  return {
    rateMax,
    ratePerMs,
    concurrency,
    unfinished: history.unfinished ?? 0,
    claims: claims.length,
    runs: runs.length,
    // Runs whose claim is not in the jobs' history: a handler ran for a claim nobody made.
    unknownRuns: runs.length - started.length,
    busiestClaimWindow: busiestWindow(
      claims.map((c) => c.claimedAt),
      ratePerMs,
    ),
    busiestHandlerWindow: busiestWindow(
      started.map((run) => run.claimedAt),
      ratePerMs,
    ),
    mostLiveLeases: mostAtOnce(claims.map((c) => ({ from: c.claimedAt, to: c.releasedAt }))),
    mostHandlers: mostAtOnce(handlerIntervals),
    // Handlers that ran on past their lease (paused or blocked workers): the documented window.
    outlivedLease: started.filter((run) => run.endedAt === null || run.endedAt > run.releasedAt).length,
  };
}

/** The mode's invariants, in the shape of report.mjs's rules. */
export function limitedInvariants(facts) {
  const rule = (name, value, bound, ok) => ({ name, value, bound, ok });
  const { rateMax, ratePerMs, concurrency } = facts;
  return [
    rule(
      `rate-limited queue: most claims in any ${ratePerMs} ms window`,
      facts.busiestClaimWindow,
      `<= ${rateMax}`,
      facts.busiestClaimWindow <= rateMax,
    ),
    rule(
      `rate-limited queue: most handler starts in any ${ratePerMs} ms window (by their claim's time)`,
      facts.busiestHandlerWindow,
      `= ${rateMax} (reached, never passed)`,
      facts.busiestHandlerWindow === rateMax,
    ),
    rule(
      'rate-limited queue: most live leases at once',
      facts.mostLiveLeases,
      `<= ${concurrency}`,
      facts.mostLiveLeases <= concurrency,
    ),
    rule(
      'rate-limited queue: most handlers running at once, outside the lease-expiry window',
      facts.mostHandlers,
      `<= ${concurrency}`,
      facts.mostHandlers <= concurrency,
    ),
    rule(
      'rate-limited queue: handler runs for a claim the history does not hold',
      facts.unknownRuns,
      '= 0',
      facts.unknownRuns === 0,
    ),
    rule(
      'rate-limited queue: jobs not succeeded after the drain',
      facts.unfinished,
      '= 0',
      facts.unfinished === 0,
    ),
  ];
}

/** The mode's measures, as the Markdown table recorded in docs/reliability.md. */
export function formatLimited(facts) {
  const lines = ['### Rate-limited queue', '', '| measure | value |', '| --- | ---: |'];
  const add = (name, value) => lines.push(`| ${name} | ${value} |`);
  add('limits', `${facts.rateMax} starts / ${facts.ratePerMs} ms, ${facts.concurrency} live leases`);
  add(
    "claims (every attempt, from the jobs' history) / handler runs (ledger)",
    `${facts.claims} / ${facts.runs}`,
  );
  add(
    'busiest window: claims / handler starts',
    `${facts.busiestClaimWindow} / ${facts.busiestHandlerWindow}`,
  );
  add('most live leases / most handlers at once', `${facts.mostLiveLeases} / ${facts.mostHandlers}`);
  add('handlers that outlived their lease (killed or paused: the lease-expiry window)', facts.outlivedLease);
  return lines.join('\n');
}
