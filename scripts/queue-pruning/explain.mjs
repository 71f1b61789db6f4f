// Running one captured statement under EXPLAIN ANALYZE, in a transaction that is rolled back, as a
// prepared statement planned either for its parameters (a custom plan: what an unnamed statement
// or a prepared one's first five executions get) or without them (a generic plan: what a named
// prepared statement, as the library sends, settles on after five). Only the statement's text is
// parsed as SQL; its parameters travel as escaped literals to EXECUTE.
import pgUtils from 'pg/lib/utils.js';
import { readPlan, statisticsReading, touchedBetween } from './plans.mjs';

/** A parameter as a SQL literal of unknown type, which EXECUTE casts to the statement's own type. */
function literal(client, value) {
  if (value === null || value === undefined) return 'NULL';
  const prepared = pgUtils.prepareValue(value);
  return prepared === null ? 'NULL' : client.escapeLiteral(String(prepared));
}

/**
 * Explains `statement` ({ text, values }) in `mode` ('custom' or 'generic'); `detach` lists
 * partitions (of `detachFrom` parents) to detach first, inside the transaction: a server that
 * holds only one shard's queues. Returns the plan's reading and the partitions the statistics saw.
 */
export async function explainStatement(client, schema, statement, mode, partitionQueue, detach = []) {
  const name = 'lh_pruning_check';
  await client.query('BEGIN');
  try {
    // As the library's own connections are set (docs/storage.md): index plans only.
    await client.query('SET LOCAL enable_seqscan = off');
    // The library's statements name their schema; an extra one may name its tables bare.
    await client.query(`SET LOCAL search_path = "${schema}"`);
    await client.query(
      `SET LOCAL plan_cache_mode = ${mode === 'generic' ? 'force_generic_plan' : 'force_custom_plan'}`,
    );
    for (const { parent, partition } of detach) {
      await client.query(`ALTER TABLE "${schema}"."${parent}" DETACH PARTITION "${schema}"."${partition}"`);
    }
    await client.query(`PREPARE ${name} AS ${statement.text}`);
    try {
      const before = await statisticsReading(client, schema);
      const args = statement.values.map((value) => literal(client, value)).join(', ');
      const { rows } = await client.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${name}${args ? `(${args})` : ''}`,
      );
      const plan = rows[0]['QUERY PLAN'][0].Plan;
      const reading = readPlan(plan, partitionQueue);
      const statistics = touchedBetween(before, await statisticsReading(client, schema));
      return { ...reading, statistics: new Set([...statistics].filter((p) => partitionQueue.has(p))), plan };
    } finally {
      await client.query('ROLLBACK');
      await client.query(`DEALLOCATE ${name}`);
    }
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
