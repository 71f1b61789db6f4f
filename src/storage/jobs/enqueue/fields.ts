// A validated job as the enqueue statements take it, and its fields as the parameter arrays of a
// batch ($2..$6, fragments.ts).

/** A validated job ready to insert. */
export interface NewJob {
  payloadJson: string;
  priority: number;
  runAt: Date | null;
  delayMs: number;
  maxAttempts: number;
  /** Per-aggregate ordering key (see ordering.ts); null for none. */
  orderingKey: string | null;
  /** Per-key concurrency limit key; null for none. */
  concurrencyKey: string | null;
  /** The key a round-robin queue takes turns between (claim-fair.ts); null or absent for none. */
  fairnessKey?: string | null;
}

/** True when the job takes turns under a fairness key (022). */
export function hasFairnessKey(job: NewJob): boolean {
  return job.fairnessKey !== undefined && job.fairnessKey !== null;
}

/**
 * The job's own fields of a batch, in parameter order $2..$6: payloads as JSON texts, then
 * priority, run_at, delay_ms and max_attempts, as parallel arrays.
 */
export function batchColumns(
  jobs: readonly NewJob[],
): [string[], number[], (Date | null)[], number[], number[]] {
  return [
    jobs.map((job) => job.payloadJson),
    jobs.map((job) => job.priority),
    jobs.map((job) => job.runAt),
    jobs.map((job) => job.delayMs),
    jobs.map((job) => job.maxAttempts),
  ];
}
