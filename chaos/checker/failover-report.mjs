// The failover rig's own invariants and report, beside the chaos checker's (report.mjs), which
// judge the new primary's timeline once failover-timeline.mjs has moved aside what was lost.

/**
 * Synchronous mode: nothing acknowledged may be lost. Asynchronous mode: losses are measured, and
 * must lie in the lag window (acknowledged by the old primary, at most `lagWindowMs` before the
 * kill). In both, the old primary's lost claims must not be confused with the new primary's.
 */
export function failoverInvariants(failover, options) {
  const { enqueues, claims, acks } = failover.timeline;
  const sync = options.mode === 'sync';
  const windowStart = failover.killStarted.getTime() - options.lagWindowMs;
  const before = (at) => at === null || at === undefined || new Date(at).getTime() >= windowStart;
  const rule = (name, value, bound, ok) => ({ name, value, bound, ok });
  const rules = [
    rule(
      'the primary answered nothing after the kill (processes killed, all gone)',
      failover.processesKilled,
      '> 0',
      failover.processesKilled > 0,
    ),
    rule(
      'claims lost that started after the promotion',
      claims.started_after_promotion,
      '= 0',
      claims.started_after_promotion === 0,
    ),
    rule(
      'handler runs recorded without a claim id',
      claims.without_claim_id,
      '= 0',
      claims.without_claim_id === 0,
    ),
    rule(
      'drained (no job pending or running on the new primary)',
      failover.drained ? 'yes' : 'no',
      'yes',
      failover.drained,
    ),
  ];
  if (sync) {
    rules.push(
      rule('acknowledged enqueues lost in the failover', enqueues.lost, '= 0', enqueues.lost === 0),
      rule(
        'acknowledged completions lost in the failover',
        acks.completions_lost,
        '= 0',
        acks.completions_lost === 0,
      ),
      rule('acknowledged claims lost in the failover', claims.lost, '= 0', claims.lost === 0),
    );
  } else {
    const windowText = `acknowledged ≤ ${options.lagWindowMs} ms before the kill`;
    rules.push(
      rule(
        'acknowledged enqueues lost: all in the lag window',
        enqueues.lost,
        windowText,
        before(enqueues.firstAckedAt),
      ),
      rule(
        'acknowledged completions lost: all in the lag window',
        acks.completions_lost,
        windowText,
        before(acks.first_lost_completion_at),
      ),
      rule(
        'acknowledged claims lost: all in the lag window',
        claims.lost,
        windowText,
        before(claims.first_started_at),
      ),
    );
  }
  return rules;
}

/**
 * The checker's exactly-once rule for effects-ledger effects, as the asynchronous mode states it:
 * an effect whose record was lost with a completion is performed again (documented); any other
 * repeat still breaks it. Synchronous mode keeps the rule as it is.
 */
export function adjustForMode(rules, failover, options) {
  if (options.mode === 'sync') return rules;
  const { effects } = failover.timeline;
  return rules.map((r) => {
    if (r.name !== 'effects-ledger effects not exactly once') return r;
    const unexplained = Number(r.value) - effects.after_lost_completion;
    return {
      name: 'effects-ledger effects not exactly once, besides those whose completion was lost (async)',
      value: `${unexplained} (${effects.after_lost_completion} after a lost completion)`,
      bound: '= 0',
      ok: unexplained === 0,
    };
  });
}

/** The failover section of the report, in Markdown. */
export function formatFailover(failover, rules, options) {
  const { enqueues, claims, acks, downstream } = failover.timeline;
  const ok = rules.every((r) => r.ok);
  const lines = [`### Failover (${options.mode}): ${ok ? 'every invariant held' : 'INVARIANTS BROKEN'}`, ''];
  lines.push('| measure | value |', '| --- | ---: |');
  const add = (name, value) => lines.push(`| ${name} | ${value} |`);
  // Positive: before the kill started; negative: written after it (a ledger row lags its answer).
  const before = (at) =>
    at === null || at === undefined ? '—' : `${Math.round(failover.killStarted - new Date(at))} ms`;
  add('primary killed after completions acknowledged', failover.killAfter);
  add('processes SIGKILLed (postmaster and every child)', failover.processesKilled);
  add('kill → standby promoted (pg_ctl promote -w returned)', ms(failover.killToPromotedMs));
  if (failover.promotedToClearedMs !== null)
    add('promoted → inherited synchronous_standby_names cleared', ms(failover.promotedToClearedMs));
  add('promoted → every listener on the new primary', ms(failover.listenersBackMs));
  add('promoted → first completion on the new primary', ms(failover.firstCompletionAfterPromotionMs));
  const lag = failover.lagAtKill;
  add(
    'standby behind at the kill: flush / replay (bytes of WAL)',
    lag ? `${Math.round(lag.flush_bytes)} / ${Math.round(lag.replay_bytes)}` : '—',
  );
  const s = failover.lagSamples;
  add(
    'replay lag during the run, median / max (bytes; ms as pg_stat_replication reports it)',
    s.replayBytes
      ? `${Math.round(s.replayBytes.median)} / ${Math.round(s.replayBytes.max)} B; ${ms(s.replayLagMs?.median)} / ${ms(s.replayLagMs?.max)}`
      : '—',
  );
  add('acknowledged enqueues lost', enqueues.lost);
  add('…acknowledged this long before the kill (earliest)', before(enqueues.firstAckedAt));
  add('…whose job id the new primary gave to another job', enqueues.ids_reissued);
  add('acknowledged claims lost (handler runs the new primary never heard of)', claims.lost);
  add('…of jobs whose enqueue survived', claims.of_known_jobs);
  add('acknowledged completions lost', acks.completions_lost);
  add(
    '…with their claim / the claim survived, the completion did not',
    `${acks.completions_lost_with_claim} / ${acks.completions_lost_alone}`,
  );
  add(
    '…recorded this long before the kill (earliest ledger row; negative: after it)',
    before(acks.first_lost_completion_at),
  );
  add('other answers to lost claims (retry, lost, ...)', acks.other_answers);
  add(
    'effects performed again: after a lost completion / in all',
    `${failover.timeline.effects.after_lost_completion} / ${failover.timeline.effects.repeated}`,
  );
  add("old holders' writes refused by the new primary (lost claims)", failover.timeline.refusedOldHolders);
  add(
    'downstream calls by lost claims / of those, called again by a later run',
    `${downstream.calls_by_lost_claims} / ${downstream.repeated_by_new_primary}`,
  );
  add(
    'ledger rows copied to the new primary',
    Object.entries(failover.copied)
      .map(([t, n]) => `${t} ${n}`)
      .join(', '),
  );
  return lines.join('\n');
}

function ms(value) {
  return value === null || value === undefined ? '—' : `${Math.round(Number(value))} ms`;
}
