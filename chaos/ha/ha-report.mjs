// The high-availability rig's own invariants and summary (chaos/ha/ha-run.mjs), beside the chaos
// checker's (report.mjs), which judges the last primary's timeline once failover-timeline.mjs has
// moved aside what the failovers lost.

const median = (values) => {
  const sorted = values.filter((v) => v !== null).sort((a, b) => a - b);
  return sorted.length === 0 ? null : sorted[Math.floor(sorted.length / 2)];
};
const worst = (values) => {
  const present = values.filter((v) => v !== null);
  return present.length === 0 ? null : Math.max(...present);
};

/** Median and worst of each measure over the failovers (ms). */
export function haSummary(records) {
  const stalls = records.flatMap((r) =>
    Object.entries(r.stallByHostMs)
      // The partitioned host's stall is the partition's, measured apart.
      .filter(([host]) => !(r.partition && r.partition.host === host))
      .map(([, ms]) => ms),
  );
  const pick = (key) => records.map((r) => r[key]);
  return {
    failovers: records.length,
    kills: records.filter((r) => r.kind === 'kill').length,
    linkCuts: records.filter((r) => r.kind === 'cut').length,
    killToPromotedMs: { median: median(pick('killToPromotedMs')), worst: worst(pick('killToPromotedMs')) },
    killToFirstCompletionMs: {
      median: median(pick('killToFirstCompletionMs')),
      worst: worst(pick('killToFirstCompletionMs')),
    },
    workerStallMs: { median: median(stalls), worst: worst(stalls) },
    rejoinMs: { median: median(pick('rejoinMs')), worst: worst(pick('rejoinMs')) },
  };
}

/**
 * Synchronous mode: nothing acknowledged may be lost over all the failovers. Asynchronous mode:
 * the losses are counted (the report explains them). In both: every failover promoted another
 * node and brought the old primary back as a standby, a completion happened on every new primary,
 * and the queue drained.
 */
export function haInvariants({ records, timeline, drained, options }) {
  const { enqueues, claims, acks } = timeline;
  const rule = (name, value, bound, ok) => ({ name, value, bound, ok });
  const rules = [
    rule(`failovers done`, records.length, `= ${options.failovers}`, records.length === options.failovers),
    rule(
      'failovers without a completion on the new primary',
      records.filter((r) => r.killToFirstCompletionMs === null).length,
      '= 0',
      records.every((r) => r.killToFirstCompletionMs !== null),
    ),
    rule(
      'old primaries that did not rejoin as standbys',
      records.filter((r) => r.rejoinMs === null).length,
      '= 0',
      records.every((r) => r.rejoinMs !== null),
    ),
    // The manager's business, not Leasehold's promise: counted, and explained in the report.
    rule(
      'old primaries that needed a reinit to follow the new primary (the manager did not rewind them)',
      records.filter((r) => r.reinitAfterMs !== null).length,
      'counted',
      true,
    ),
    rule('drained (no job pending or running on the last primary)', drained ? 'yes' : 'no', 'yes', drained),
    rule(
      'handler runs recorded without a claim id',
      claims.without_claim_id,
      '= 0',
      claims.without_claim_id === 0,
    ),
  ];
  if (options.mode === 'sync') {
    rules.push(
      rule('acknowledged enqueues lost in the failovers', enqueues.lost, '= 0', enqueues.lost === 0),
      rule(
        'acknowledged completions lost in the failovers',
        acks.completions_lost,
        '= 0',
        acks.completions_lost === 0,
      ),
      rule('acknowledged claims lost in the failovers', claims.lost, '= 0', claims.lost === 0),
    );
  } else {
    rules.push(
      rule('acknowledged enqueues lost (async: counted)', enqueues.lost, 'counted', true),
      rule(
        'acknowledged completions lost (async: counted, the jobs ran again)',
        acks.completions_lost,
        'counted',
        true,
      ),
      rule('acknowledged claims lost (async: counted)', claims.lost, 'counted', true),
    );
  }
  return rules;
}
