// Small statistics helpers: medians of repetitions and latency percentiles.

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Nearest-rank percentile (p in 0..100) of unsorted samples. */
export function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1];
}

/** Median, min and max of repeated throughput measurements. */
export function summarize(values) {
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), runs: values };
}
