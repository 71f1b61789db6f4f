// Reading which partitions a statement touched, from its EXPLAIN (ANALYZE, FORMAT JSON) plan and
// from the transaction's table statistics (pg_stat_xact_user_tables), which also see the rows an
// INSERT routed to a partition (tuple routing happens below the plan, so no plan node names it).

/** Every node of a plan, the root first, with the init plans and sub plans under it. */
export function planNodes(node) {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}

/**
 * What the plan says about the partitions in `partitionQueue` (name -> queue):
 * `planned` every partition that has a node in the plan (not pruned when planning),
 * `executed` those whose node ran at least once, `subplansRemoved` the partitions pruned when the
 * executor started (initial run-time pruning with the statement's parameters).
 */
export function readPlan(plan, partitionQueue) {
  const planned = new Set();
  const executed = new Set();
  let subplansRemoved = 0;
  for (const node of planNodes(plan)) {
    subplansRemoved += node['Subplans Removed'] ?? 0;
    const name = node['Relation Name'];
    if (name === undefined || !partitionQueue.has(name)) continue;
    planned.add(name);
    if ((node['Actual Loops'] ?? 0) > 0) executed.add(name);
  }
  return { planned, executed, subplansRemoved };
}

/**
 * Per table of `schema`: the scans and row writes this backend has counted and not yet sent to the
 * statistics system. The counts outlive a transaction until they are sent, so what one statement
 * did is the difference of two readings around it.
 */
export async function statisticsReading(client, schema) {
  const { rows } = await client.query(
    `SELECT relname, coalesce(seq_scan, 0) + coalesce(idx_scan, 0) + n_tup_ins + n_tup_upd + n_tup_del AS n
     FROM pg_stat_xact_user_tables WHERE schemaname = $1`,
    [schema],
  );
  return new Map(rows.map((row) => [row.relname, Number(row.n)]));
}

/** The tables whose count grew from reading `before` to reading `after`. */
export function touchedBetween(before, after) {
  return new Set([...after].filter(([name, n]) => n > (before.get(name) ?? 0)).map(([name]) => name));
}
