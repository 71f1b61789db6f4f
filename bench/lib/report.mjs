// Formats the results as one Markdown table (it pastes into docs/benchmarks.md as it is).

const number = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

function throughput(summary) {
  if (summary.runs.length === 1) return number.format(summary.median);
  return `${number.format(summary.median)} (${number.format(summary.min)}–${number.format(summary.max)})`;
}

function ms(value) {
  return value.toFixed(2);
}

/** A latency percentile over repetitions: its median, and min–max when there were several. */
function latency(summary) {
  if (summary.runs.length === 1) return ms(summary.median);
  return `${ms(summary.median)} (${ms(summary.min)}–${ms(summary.max)})`;
}

function ratio(ours, theirs) {
  return `${(ours / theirs).toFixed(2)}×`;
}

/**
 * rows: { workload, ours, theirsLabel, theirs, kind: 'throughput' | 'latency' | 'gap' | 'unavailable', reason }
 * ours/theirs: a summary of repetitions (`summarize`: throughput, or ms for latency rows); for
 * 'gap' rows, `ours` alone, a difference in ms.
 */
export function formatTable(rows, { reps, latencySamples }) {
  const header = [
    `Throughput in jobs/s: median of ${reps} run(s), min–max in parentheses; higher is better.`,
    `Latency in ms from enqueue call to handler start: per run ${latencySamples} samples after 10 warm-up, median of ${reps} run(s) (min–max); lower is better.`,
    'Ratio = Leasehold ÷ the other: above 1× means Leasehold is ahead on throughput and behind on latency.',
    '',
    '| Workload | Leasehold | Compared with | Their result | Ratio | Better |',
    '| --- | ---: | --- | ---: | ---: | --- |',
  ];
  const lines = rows.map((row) => {
    if (row.kind === 'unavailable') {
      return `| ${row.workload} | ${row.ours ? throughput(row.ours) : '—'} | ${row.theirsLabel} | not run: ${row.reason} | — | — |`;
    }
    if (row.kind === 'latency') {
      return `| ${row.workload} | ${latency(row.ours)} | ${row.theirsLabel} | ${latency(row.theirs)} | ${ratio(row.ours.median, row.theirs.median)} | lower |`;
    }
    if (row.kind === 'gap') {
      return `| ${row.workload} | ${row.ours >= 0 ? '+' : '−'}${ms(Math.abs(row.ours))} | — | — | — | lower |`;
    }
    return `| ${row.workload} | ${throughput(row.ours)} | ${row.theirsLabel} | ${throughput(row.theirs)} | ${ratio(row.ours.median, row.theirs.median)} | higher |`;
  });
  return [...header, ...lines].join('\n');
}
