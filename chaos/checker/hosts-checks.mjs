// What the many-hosts harness measures beyond the chaos checker (chaos/checker/checker.mjs, which judges
// the whole run): per link cut, what became of the cut host's claims; per phase, each host's
// completion rate; in the latency phase, the long jobs on the distant host: how often their leases
// were renewed across its delayed link, how much lease was left at each renewal, and whether any
// of its leases lapsed (chaos/records/renewal-log.mjs records the renewals). Every
// time compared is database time. A worker's label is `h<host><phase>w<n>` (phase b: fault-free,
// f: faulted, l: latency), the first part of its lease owner names.

/** Reads the measures; `phases` as the harness ran them, `cuts` as it recorded them. */
export async function measureHosts(db, { phases, cuts, latencyHost, farQueue }) {
  const all = async (sql, values = []) => (await db.query(sql, values)).rows;
  const one = async (sql, values = []) => (await all(sql, values))[0];

  const partitions = [];
  for (const cut of cuts) {
    const prefix = `h${cut.host}${cut.phase}w`;
    // The cut host's claims that lapsed while it was cut off (or within a lease of its return:
    // the sweep may find them a little after the link is back).
    const row = await one(
      `
      WITH expired AS (
        SELECT DISTINCT ON (e.job_id, e.lease_token) e.job_id, e.lease_token AS token, e.at
        FROM leasehold.job_events e
        WHERE e.kind = 'lease_expired' AND starts_with(e.lease_owner, $1)
          AND e.at BETWEEN $2 AND $3::timestamptz + $4 * interval '1 millisecond'
        ORDER BY e.job_id, e.lease_token, e.at
      )
      SELECT count(*)::int AS expired,
        count(*) FILTER (WHERE f.lease_token > x.token)::int AS finished_later,
        count(*) FILTER (WHERE f.lease_token > x.token AND NOT starts_with(f.lease_owner, 'h' || $5 || $6))::int AS finished_elsewhere,
        count(*) FILTER (WHERE f.id IS NULL)::int AS unfinished,
        -- Writes of the lapsed claims that the database accepted after the expiry (events other
        -- than refusals, or the completion itself): there must be none.
        (SELECT count(*) FROM expired y JOIN leasehold.job_events w
           ON w.job_id = y.job_id AND w.lease_token = y.token AND w.at > y.at
           AND w.kind NOT IN ('refused', 'lease_expired'))::int
          + count(*) FILTER (WHERE f.lease_token = x.token)::int AS accepted_after_expiry,
        (SELECT count(*) FROM expired y JOIN leasehold.job_events w
           ON w.job_id = y.job_id AND w.lease_token = y.token AND w.kind = 'refused'
           AND starts_with(w.lease_owner, $1))::int AS refused,
        (SELECT count(*) FROM expired y JOIN leasehold.job_events w
           ON w.job_id = y.job_id AND w.lease_token = y.token AND w.kind = 'refused'
           AND starts_with(w.lease_owner, $1) AND w.at >= $3)::int AS refused_after_return,
        -- Outcomes the cut host's worker answered as lost, and those it answered without sending a
        -- write (it knew its lease was gone: nothing to refuse).
        (SELECT count(*) FROM expired y JOIN chaos.acks a
           ON a.job_id = y.job_id AND a.token = y.token AND a.result = 'lost')::int AS lost_answers,
        (SELECT count(*) FROM expired y JOIN chaos.acks a
           ON a.job_id = y.job_id AND a.token = y.token AND a.result = 'lost'
           WHERE NOT EXISTS (SELECT 1 FROM leasehold.job_events w WHERE w.job_id = y.job_id
             AND w.lease_token = y.token AND w.kind = 'refused'))::int AS lost_uncounted,
        (SELECT count(*) FROM expired y JOIN chaos.acks a
           ON a.job_id = y.job_id AND a.token = y.token AND a.result = 'completed')::int AS completed_answers
      FROM expired x LEFT JOIN leasehold.finished_jobs f ON f.id = x.job_id`,
      [prefix, cut.injectedAt, cut.healedAt, cut.leaseMs, cut.host, cut.phase],
    );
    partitions.push({ ...cut, ...row });
  }

  const throughput = [];
  for (const phase of phases) {
    // The window: from the phase's start until 90% of its jobs had finished, so that the tail
    // (the last retries of recovered jobs, the drain) does not dilute a host's rate.
    const rows = await all(
      `
      WITH done AS (
        SELECT finished_at, substring(lease_owner FROM '^h([0-9]+)')::int AS host
        FROM leasehold.finished_jobs
        WHERE lease_owner ~ ('^h[0-9]+' || $1 || 'w') AND finished_at >= $2 AND finished_at <= $3
      ),
      edge AS (SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY finished_at) AS t90 FROM done)
      SELECT d.host, count(*)::int AS finished,
        count(*) FILTER (WHERE d.finished_at <= edge.t90)::int AS in_window,
        extract(epoch FROM edge.t90 - $2::timestamptz)::float8 AS window_s
      FROM done d, edge GROUP BY d.host, edge.t90 ORDER BY d.host`,
      [phase.letter, phase.startedAt, phase.endedAt],
    );
    for (const r of rows)
      throughput.push({
        phase: phase.name,
        host: r.host,
        finished: r.finished,
        windowS: r.window_s,
        rate: r.window_s > 0 ? r.in_window / r.window_s : null,
      });
  }

  let latency = null;
  const lp = phases.find((p) => p.letter === 'l');
  if (lp && latencyHost) {
    const prefix = `h${latencyHost}lw`;
    latency = await one(
      `
      SELECT
        (SELECT count(*) FROM leasehold.job_events WHERE kind = 'lease_expired' AND starts_with(lease_owner, $1))::int AS expiries,
        (SELECT count(*) FROM leasehold.job_events WHERE kind = 'refused' AND starts_with(lease_owner, $1))::int AS refusals,
        (SELECT count(*) FROM chaos.acks WHERE starts_with(owner, $1) AND result = 'lost')::int AS lost_answers,
        (SELECT count(*) FROM leasehold.finished_jobs WHERE starts_with(lease_owner, $1))::int AS finished,
        (SELECT count(*) FROM chaos.executions x WHERE starts_with(x.owner, $1) AND x.duration_ms >= $2)::int AS renewed_runs,
        (SELECT count(*) FROM leasehold.job_events WHERE kind = 'lease_expired' AND at BETWEEN $3 AND $4)::int AS phase_expiries`,
      [prefix, lp.longJobMs * 0.9, lp.startedAt, lp.endedAt],
    );
    // The long jobs (queue $2, which only the distant host serves): where each finished, after how
    // many claims, and how many renewals its final claim made (the count Leasehold keeps on the row).
    const long = await one(
      `
      SELECT count(*)::int AS finished,
        count(*) FILTER (WHERE starts_with(lease_owner, $1))::int AS finished_on_host,
        count(*) FILTER (WHERE attempt_count = 1)::int AS first_claim,
        coalesce(sum(lease_extensions), 0)::int AS extensions,
        coalesce(min(lease_extensions), 0)::int AS min_extensions,
        coalesce(max(lease_extensions), 0)::int AS max_extensions
      FROM leasehold.finished_jobs WHERE queue_name = $2`,
      [prefix, farQueue],
    );
    // Every renewal the database applied to them, with the lease left when it landed (old expiry
    // minus the renewing statement's now()) and the time since the claim's previous renewal.
    const renewals = await one(
      `
      WITH r AS (
        SELECT *, extract(epoch FROM old_expires_at - at) * 1000 AS left_ms,
          extract(epoch FROM at - lag(at) OVER (PARTITION BY job_id, token ORDER BY at)) * 1000 AS gap_ms
        FROM chaos.renewals WHERE queue = $2
      )
      SELECT count(*)::int AS renewals,
        count(*) FILTER (WHERE starts_with(owner, $1))::int AS on_host,
        count(DISTINCT (job_id, token))::int AS claims,
        min(left_ms)::float8 AS min_left_ms,
        (percentile_cont(0.5) WITHIN GROUP (ORDER BY left_ms))::float8 AS median_left_ms,
        max(left_ms)::float8 AS max_left_ms,
        (percentile_cont(0.5) WITHIN GROUP (ORDER BY gap_ms))::float8 AS median_gap_ms,
        max(gap_ms)::float8 AS max_gap_ms
      FROM r`,
      [prefix, farQueue],
    );
    Object.assign(latency, {
      host: latencyHost,
      longJobs: lp.longJobs,
      longJobMs: lp.longJobMs,
      long,
      renewals,
    });
  }
  return { partitions, throughput, latency };
}

/** The invariants these measures must satisfy. */
export function hostInvariants(measures, { healthyHosts, minThroughputPct, phases }) {
  const rule = (name, value, bound, ok) => ({ name, value, bound, ok });
  const p = measures.partitions;
  const sum = (key) => p.reduce((n, c) => n + Number(c[key]), 0);
  const rules = [];
  if (phases.includes('faulted'))
    rules.push(
      rule(
        'link cuts during which the cut host had leases lapse',
        p.filter((c) => c.expired > 0).length,
        `= ${p.length} (every cut)`,
        p.length > 0 && p.every((c) => c.expired > 0),
      ),
      rule(
        "cut host's lapsed claims not finished by a later claim",
        sum('expired') - sum('finished_later'),
        '= 0',
        sum('expired') === sum('finished_later'),
      ),
      rule(
        "cut host's lapsed claims finished on another host",
        sum('finished_elsewhere'),
        '> 0',
        sum('finished_elsewhere') > 0,
      ),
      rule(
        "cut host's writes for lapsed claims accepted after the expiry",
        sum('accepted_after_expiry') + sum('completed_answers'),
        '= 0',
        sum('accepted_after_expiry') + sum('completed_answers') === 0,
      ),
      rule(
        "cut host's writes for lapsed claims refused and counted after its link returned",
        sum('refused_after_return'),
        '> 0',
        sum('refused_after_return') > 0,
      ),
    );
  for (const host of phases.includes('fault-free') && phases.includes('faulted') ? healthyHosts : []) {
    const base = measures.throughput.find((t) => t.phase === 'fault-free' && t.host === host);
    const faulted = measures.throughput.find((t) => t.phase === 'faulted' && t.host === host);
    const pct = base?.rate && faulted?.rate ? (100 * faulted.rate) / base.rate : null;
    rules.push(
      rule(
        `healthy host ${host}: completion rate, faulted phase / fault-free phase`,
        pct === null
          ? '—'
          : `${Math.round(pct)}% (${Math.round(faulted.rate)} / ${Math.round(base.rate)} jobs/s)`,
        `≥ ${minThroughputPct}%`,
        pct !== null && pct >= minThroughputPct,
      ),
    );
  }
  const l = measures.latency;
  if (l) {
    rules.push(
      rule(
        `latency phase, host ${l.host}: lease expiries / refusals / lost answers at the library defaults`,
        `${l.expiries} / ${l.refusals} / ${l.lost_answers}`,
        '0 / 0 / 0',
        l.expiries + l.refusals + l.lost_answers === 0,
      ),
    );
    // The long jobs must all have run on the distant host, each needing renewals to finish, and
    // those renewals must have crossed its link: the requirement is about exactly those.
    const { long, renewals } = l;
    rules.push(
      rule(
        `latency phase: long jobs (${Math.round(l.longJobMs / 1000)} s, longer than the default lease) finished on host ${l.host}, on their first claim`,
        `${long.finished_on_host} / ${long.first_claim} of ${l.longJobs}`,
        `= ${l.longJobs} / ${l.longJobs}`,
        long.finished_on_host === l.longJobs &&
          long.first_claim === l.longJobs &&
          long.finished === l.longJobs,
      ),
      rule(
        `latency phase: renewals of those long jobs that crossed host ${l.host}'s link (fewest per job)`,
        `${renewals.on_host} (${long.min_extensions})`,
        '≥ 1 per job',
        long.min_extensions >= 1 && renewals.on_host >= l.longJobs && renewals.on_host === renewals.renewals,
      ),
    );
  }
  return rules;
}

/** The harness's own tables, in Markdown. */
export function formatHosts(measures, phases) {
  const lines = [
    '### Phases',
    '',
    '| phase | jobs | lasted | host | impairment | finished | rate (to 90%) |',
    '| --- | ---: | ---: | ---: | --- | ---: | ---: |',
  ];
  for (const phase of phases) {
    for (const t of measures.throughput.filter((x) => x.phase === phase.name)) {
      const imp = phase.impairments[t.host] ?? {};
      const text = [
        imp.cuts ? `${imp.cuts} cuts of ${imp.cutMs} ms` : '',
        imp.rttMs ? `+${imp.rttMs} ms RTT` : '',
        imp.jitterMs ? `±${imp.jitterMs} ms jitter` : '',
        imp.lossPct ? `${imp.lossPct}% loss` : '',
      ]
        .filter(Boolean)
        .join(', ');
      lines.push(
        `| ${phase.name} | ${phase.jobs} | ${Math.round(phase.seconds)} s | ${t.host} | ${text || 'none'} | ${t.finished} | ${Math.round(t.rate ?? 0)} jobs/s |`,
      );
    }
  }
  lines.push(
    '',
    '### Link cuts',
    '',
    '| cut | host | down | lapsed claims | finished later / elsewhere | refused (after return) | lost answers (sent no write) | accepted after expiry |',
    '| ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |',
  );
  measures.partitions.forEach((c, i) => {
    const down = new Date(c.healedAt).getTime() - new Date(c.injectedAt).getTime();
    lines.push(
      `| ${i + 1} | ${c.host} | ${down} ms | ${c.expired} | ${c.finished_later} / ${c.finished_elsewhere} | ${c.refused} (${c.refused_after_return}) | ${c.lost_answers} (${c.lost_uncounted}) | ${c.accepted_after_expiry} |`,
    );
  });
  const l = measures.latency;
  if (l)
    lines.push(
      '',
      `Latency phase, host ${l.host}: ${l.finished} jobs finished, ${l.renewed_runs} runs long enough to need renewals; lease expiries ${l.expiries}, refusals ${l.refusals}; expiries on any host during the phase ${l.phase_expiries}.`,
    );
  if (l?.renewals) {
    const r = l.renewals;
    const ms = (x) => (x === null || x === undefined ? '—' : `${Math.round(x)} ms`);
    lines.push(
      '',
      `Long jobs on host ${l.host} (${l.long.finished_on_host} of ${l.longJobs}, ${Math.round(l.longJobMs / 1000)} s each): ${r.renewals} renewals applied (${r.on_host} from host ${l.host}; ${l.long.min_extensions}..${l.long.max_extensions} per job, ${l.long.extensions} in all by the rows' own count); lease left when a renewal landed: min ${ms(r.min_left_ms)}, median ${ms(r.median_left_ms)}, max ${ms(r.max_left_ms)}; time between a claim's renewals: median ${ms(r.median_gap_ms)}, max ${ms(r.max_gap_ms)}.`,
    );
  }
  for (const [host, probe] of Object.entries(measures.rtt ?? {}))
    lines.push(
      '',
      probe.error
        ? `Round trip from host ${host}: not measured (${probe.error}).`
        : `Round trip from host ${host} (SELECT 1 through its relay, ${probe.n} queries during the latency phase): median ${probe.medianMs} ms, min ${probe.minMs} ms, max ${probe.maxMs} ms.`,
    );
  return lines.join('\n');
}
