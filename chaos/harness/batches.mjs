// The batch workload (--batch-size): what the workers' batch handlers saw, summed over every worker
// process's last status (a killed worker's too), and the invariants that prove the workload really
// ran in batches, none larger than asked. Every other invariant is judged as for single handlers.

/** Sums the `batches` of each worker's last status: calls, jobs in them, the largest. */
export function batchFacts(workers) {
  const facts = { calls: 0, jobs: 0, largest: 0, multi: 0 };
  for (const worker of workers) {
    const seen = worker.status?.batches;
    if (!seen) continue;
    facts.calls += seen.calls;
    facts.jobs += seen.jobs;
    facts.multi += seen.multi;
    facts.largest = Math.max(facts.largest, seen.largest);
  }
  return facts;
}

/** The batch workload's invariants: it batched (some call got more than one job), within the size. */
export function batchInvariants(facts, size) {
  return [
    {
      name: 'batch handler calls with more than one job (the workload really batched)',
      value: `${facts.multi} of ${facts.calls} (${facts.jobs} jobs)`,
      bound: '> 0',
      ok: facts.multi > 0,
    },
    { name: 'largest batch', value: facts.largest, bound: `≤ ${size}`, ok: facts.largest <= size },
  ];
}
