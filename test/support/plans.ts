/** One node of an `EXPLAIN (ANALYZE, FORMAT JSON)` plan, with the fields the plan tests read. */
export interface PlanNode {
  'Node Type': string;
  /** Of a ModifyTable node: Insert, Update or Delete. */
  Operation?: string;
  'Relation Name'?: string;
  /** Of a ModifyTable node on a partitioned table: the partitions it may write. */
  'Target Tables'?: { 'Relation Name': string }[];
  'Actual Rows'?: number;
  'Rows Removed by Join Filter'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** Every node of a plan, the root first. */
export function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}
