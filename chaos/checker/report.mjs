// Turns the checker's measures into invariants (each with its value, its bound and whether it
// held) and a Markdown report: the table recorded in docs/reliability.md.

/** The invariants the run must satisfy; `run` adds what only the harness saw (producer, nemesis). */
export function invariants(facts, run) {
  const { jobs, stale, acks, reruns, overlap, recovery, early, effects, settings } = facts;
  const pauses = facts.pauses.filter((p) => p.kind === 'pause' && p.in_flight > 0);
  const maxLag = Math.max(0, ...pauses.map((p) => Number(p.lag_ms ?? 0)));
  const shortPauseExpiries = facts.pauses
    .filter((p) => p.kind === 'short-pause')
    .reduce((n, p) => n + p.expired, 0);
  const exhaustion = facts.faults.filter((f) => f.kind === 'exhaustion');
  const badProbes = exhaustion.filter(
    (f) =>
      f.detail.enqueue?.result === 'hung' ||
      (f.detail.enqueue?.result === 'rejected' && !f.detail.enqueue.typed),
  );
  const reconnects = facts.faults.filter((f) => ['terminate', 'restart', 'failover'].includes(f.kind));
  const notReconnected = reconnects.filter((f) => f.detail.listenersReconnectedMs === null);
  const missing = [...run.requestedKinds].filter((kind) => !facts.faults.some((f) => f.kind === kind));
  const tol = settings.toleranceMs;
  const rule = (name, value, bound, ok) => ({ name, value, bound, ok });
  return [
    rule('jobs lost (acknowledged, then gone without finishing)', jobs.vanished, '= 0', jobs.vanished === 0),
    rule('jobs stuck (pending or running after the drain)', jobs.stuck, '= 0', jobs.stuck === 0),
    rule('jobs dead (no handler here fails for good)', jobs.dead, '= 0', jobs.dead === 0),
    rule(
      'acknowledged jobs that ended neither succeeded nor dead (cancelled, or a status unknown here)',
      jobs.other,
      '= 0',
      jobs.other === 0,
    ),
    rule(
      'stale completions accepted',
      stale.later_claim_ran + stale.claim_already_ended,
      '= 0',
      stale.later_claim_ran + stale.claim_already_ended === 0,
    ),
    rule('completions accepted for a claim that never ran', stale.no_run, '= 0', stale.no_run === 0),
    rule('completions accepted per claim (most)', acks.max_per_claim, '≤ 1', acks.max_per_claim <= 1),
    rule(
      'completions acknowledged to a worker but not the recorded one',
      acks.jobs_twice + acks.mismatched + acks.unfinished,
      '= 0',
      acks.jobs_twice + acks.mismatched + acks.unfinished === 0,
    ),
    rule(
      're-runs with no recorded end of the previous claim',
      reruns.unexplained,
      '= 0',
      reruns.unexplained === 0,
    ),
    rule(
      'duplicate executions not explained by a lease expiry',
      reruns.duplicates_unexplained,
      '= 0',
      reruns.duplicates_unexplained === 0,
    ),
    rule(
      'longest overlap of two runs of one job, both executing (ms)',
      round(overlap.longest_ms),
      `≤ ${round(settings.overlapBoundMs)} (lease + 1.25 × sweep interval + ${tol} ms)`,
      overlap.beyond_bound === 0,
    ),
    rule('attempts beyond max_attempts', facts.runs.beyondMax, '= 0', facts.runs.beyondMax === 0),
    rule(
      'expired claims recovered more than once',
      recovery.double_recoveries,
      '= 0',
      recovery.double_recoveries === 0,
    ),
    rule(
      'lease expiries no fault explains (false expiries)',
      recovery.falseExpiries,
      '= 0',
      recovery.falseExpiries === 0,
    ),
    rule(
      'lease expiries during a pause shorter than the lease',
      shortPauseExpiries,
      '= 0',
      shortPauseExpiries === 0,
    ),
    rule('runs started before their scheduled time', early.n, '= 0', early.n === 0),
    rule(
      'paused worker: longest run after SIGCONT (ms)',
      round(maxLag),
      `≤ ${round(settings.renewalMs + tol)} (one renewal interval + ${tol} ms)`,
      maxLag <= settings.renewalMs + tol,
    ),
    rule(
      'completion-transaction effects not exactly once',
      effects.txn_not_once + effects.txn_orphans,
      '= 0',
      effects.txn_not_once + effects.txn_orphans === 0,
    ),
    rule(
      'job.transaction counter: total minus counter jobs, rows not bumped exactly once, orphans',
      `${effects.counter_total - effects.counter_jobs} / ${effects.counter_not_once} / ${effects.counter_orphans}`,
      '0 / 0 / 0',
      effects.counter_total === effects.counter_jobs &&
        effects.counter_not_once === 0 &&
        effects.counter_orphans === 0,
    ),
    rule(
      'effects-ledger effects not exactly once',
      effects.ledger_not_once,
      '= 0',
      effects.ledger_not_once === 0,
    ),
    rule(
      'downstream calls missing or not applied (at-least-once effects)',
      effects.plain_never_called + effects.plain_not_applied,
      '= 0',
      effects.plain_never_called + effects.plain_not_applied === 0,
    ),
    rule(
      'idempotency keys shared by two jobs (a downstream applies only the first)',
      facts.sharedKeys.keys,
      '= 0',
      facts.sharedKeys.keys === 0,
    ),
    rule(
      'enqueues that hung or failed untyped',
      run.producer.errors.untyped + badProbes.length,
      '= 0',
      run.producer.errors.untyped + badProbes.length === 0,
    ),
    rule('listeners not back after a fault', notReconnected.length, '= 0', notReconnected.length === 0),
    rule('requested faults that never happened', missing.join(', ') || 0, 'none', missing.length === 0),
    rule(
      'worker processes that failed on their own',
      run.workerFailures.length,
      '= 0',
      run.workerFailures.length === 0,
    ),
  ];
}

/** p50/p99/max of recovery times per fault kind (faults that stranded at least one job). */
export function recoveryByKind(facts) {
  const byKind = new Map();
  for (const row of facts.recoveryTimes) {
    const entry = byKind.get(row.kind) ?? {
      ...{ kind: row.kind, faults: 0, stranded: 0 },
      ...{ times: [], released: [], resumed: [] },
    };
    entry.faults++;
    entry.stranded += row.stranded;
    if (row.stranded > 0 && row.recovery_ms !== null) entry.times.push(Number(row.recovery_ms));
    if (row.stranded > 0 && row.released_ms !== null) entry.released.push(Number(row.released_ms));
    if (row.resumed_ms !== null) entry.resumed.push(Number(row.resumed_ms));
    byKind.set(row.kind, entry);
  }
  return [...byKind.values()].map((e) => ({
    kind: e.kind,
    faults: e.faults,
    stranded: e.stranded,
    releasedP50: percentile(e.released, 0.5),
    releasedP99: percentile(e.released, 0.99),
    p50: percentile(e.times, 0.5),
    p99: percentile(e.times, 0.99),
    max: e.times.length ? Math.max(...e.times) : null,
    resumedP50: percentile(e.resumed, 0.5),
  }));
}

/** The whole report, in Markdown. */
export function formatReport(facts, rules, run) {
  const { jobs, reruns, overlap, recovery, effects, acks } = facts;
  const refused = facts.refusals.map((r) => `${r.operation} ${r.n}`).join(', ') || 'none';
  const lines = [];
  lines.push(`### Verdict: ${rules.every((r) => r.ok) ? 'every invariant held' : 'INVARIANTS BROKEN'}`, '');
  lines.push('| invariant | measured | bound | |', '| --- | ---: | --- | --- |');
  for (const r of rules)
    lines.push(`| ${r.name} | ${r.value} | ${r.bound} | ${r.ok ? 'ok' : '**BROKEN**'} |`);
  lines.push('', '### What happened', '');
  lines.push('| measure | value |', '| --- | ---: |');
  const add = (name, value) => lines.push(`| ${name} | ${value} |`);
  add('jobs enqueued and acknowledged', jobs.acked);
  add('jobs succeeded', jobs.succeeded);
  add('jobs present that no enqueue acknowledged (an answer lost to a fault)', jobs.unacknowledgedPresent);
  add('handler runs (ledger)', facts.runs.runs);
  add('runs whose end is unknown (no end record, process not killed)', facts.runs.end_unknown);
  add('completions acknowledged to workers', acks.completed);
  add('outcomes answered as lost (fenced out) to workers', acks.lost_answers);
  add('stale writes refused and counted (lease_refusals)', refused);
  add('lease expiries recovered by the sweeps', recovery.expiries);
  add(
    're-runs: after a lease expiry / after a recorded failure / other',
    `${reruns.after_expiry} / ${reruns.after_failure} / ${reruns.after_other}`,
  );
  add('duplicate executions (an earlier run had finished its work)', reruns.duplicates);
  add('…of which explained by a lease expiry', reruns.duplicates_after_expiry);
  add('overlapping run pairs / longest overlap', `${overlap.overlapping} / ${round(overlap.longest_ms)} ms`);
  add('longest overlap counting a SIGSTOPped run as running', `${round(overlap.longest_raw_ms)} ms`);
  add('runs of delayed jobs (none may start early)', facts.early.delayed_runs);
  add('runs / completions by the skewed-clock workers', `${facts.skewed.runs} / ${facts.skewed.completed}`);
  add('jobs with the effect in the completion transaction (exactly once)', effects.txn_jobs);
  add('jobs with the effect through the effects ledger (exactly once)', effects.ledger_jobs);
  add('counter jobs (job.transaction) / counter total', `${effects.counter_jobs} / ${effects.counter_total}`);
  add(
    'plain jobs / repeated downstream calls, deduplicated by key',
    `${effects.plain_jobs} / ${effects.plain_repeat_calls}`,
  );
  add('enqueue calls that failed (typed, retried)', run.producer.errors.total);
  add('slowest enqueue call', `${round(run.producer.slowestMs)} ms`);
  add('overall completion rate', `${round(facts.overallRate)} jobs/s`);
  for (const pin of facts.pinThroughput) {
    add(
      `completion rate while a transaction pinned xmin (${round(pin.seconds)} s)`,
      `${round(pin.rate)} jobs/s`,
    );
  }
  lines.push('', '### Recovery after each kind of fault', '');
  lines.push(
    'Jobs in flight: jobs of the Leasehold worker queue running in the affected processes when the fault hit ' +
      '(hand-completed jobs are left out: their retries are slow on purpose). Released: from injection until ' +
      'each of their claims was resolved (completed, or ended by a failure or a recovered expiry), so that the ' +
      'job could run again. Succeeded: until each had succeeded again; a recovered job is retried in ' +
      'available_at order, behind any backlog, so this includes waiting its turn. Resumed: from healing until ' +
      'the next accepted completion.',
    '',
  );
  lines.push(
    '| fault | injected | jobs in flight | released p50 | released p99 | succeeded p50 | succeeded p99 | resumed p50 |',
  );
  lines.push('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const k of recoveryByKind(facts)) {
    const cells = [k.kind, k.faults, k.stranded, ms(k.releasedP50), ms(k.releasedP99), ms(k.p50), ms(k.p99)];
    lines.push(`| ${cells.join(' | ')} | ${ms(k.resumedP50)} |`);
  }
  lines.push('', '### Fault log', '');
  lines.push('| # | fault | target | lasted | details |', '| ---: | --- | --- | ---: | --- |');
  for (const f of facts.faults) {
    const lasted = new Date(f.healed_at).getTime() - new Date(f.injected_at).getTime();
    lines.push(`| ${f.id} | ${f.kind} | ${f.target} | ${ms(lasted)} | ${describeDetail(f)} |`);
  }
  if (run.workerFailures.length > 0) lines.push('', `Worker failures: ${run.workerFailures.join('; ')}`);
  if (run.nemesisErrors.length > 0)
    lines.push('', `Faults that could not be injected: ${run.nemesisErrors.join('; ')}`);
  return lines.join('\n');
}

function describeDetail(f) {
  const d = f.detail;
  switch (f.kind) {
    case 'kill':
      return `${d.handling} handler(s) running`;
    case 'pause':
    case 'short-pause':
      return `stopped ${d.pausedMs} ms, inside ${d.caught}`;
    case 'block':
      return `event loop blocked ${d.blockMs} ms`;
    case 'terminate':
      return `terminated ${Object.entries(d.terminated ?? {})
        .map(([app, n]) => `${n} ${app}`)
        .join(', ')}; listeners back in ${ms(d.listenersReconnectedMs)}`;
    case 'restart':
      return `down ${d.downMs} ms; listeners back in ${ms(d.listenersReconnectedMs)}`;
    case 'failover':
      return `primary SIGKILLed (${d.processesKilled} processes), standby promoted ${ms(d.killToPromotedMs)} after; listeners back in ${ms(d.listenersReconnectedMs)}`;
    case 'pin':
      return `held ${ms(d.holdMs)}; health check flagged it: ${d.healthCheckFlagged ? 'yes' : 'no'}`;
    case 'sweeps':
      return `6 extra sweepers moved ${d.movedBySweeper?.join('+')}`;
    case 'exhaustion':
      return `${d.held} connections held (then ${d.refusal}); fresh enqueue ${d.enqueue?.result}${d.enqueue?.code ? ` (${d.enqueue.code} ${d.enqueue.sqlState ?? ''})` : ''} in ${d.enqueue?.ms} ms`;
    case 'skew':
      return Object.entries(d.skewMs ?? {})
        .map(([w, s]) => `${w} ${s > 0 ? '+' : ''}${s / 60000} min`)
        .join(', ');
    default:
      return JSON.stringify(d);
  }
}

function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
}

function round(value) {
  return value === null || value === undefined ? '—' : Math.round(Number(value));
}

function ms(value) {
  return value === null || value === undefined ? '—' : `${Math.round(Number(value))} ms`;
}
