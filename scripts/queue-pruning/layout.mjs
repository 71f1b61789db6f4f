// The queue-partitioned layout of the hot tables, built in a migrated Leasehold schema so that the
// library's own statements (which name `<schema>.jobs`, `<schema>.job_events`, ...) run against it
// unchanged. Each table with a queue_name column that a hot statement reads or writes becomes
// PARTITION BY LIST (queue_name), one partition per queue: the stand-in for one shard (a Citus
// shard of tables distributed by queue, or one PostgreSQL cluster of a queue-per-cluster split).
// jobs and finished_jobs keep their lanes (migration 018) inside each queue: LIST (lane) again.
// The tables are moved aside (renamed `<table>_unsharded`), never dropped, so nothing that depends
// on them breaks; the scratch schema is dropped whole afterwards.

/** The tables partitioned by queue, and whether each keeps lanes inside its queues. */
export const QUEUE_TABLES = [
  { table: 'jobs', lanes: true },
  { table: 'finished_jobs', lanes: true },
  { table: 'job_events', lanes: false },
  { table: 'lease_refusals', lanes: false },
  { table: 'concurrency_keys', lanes: false },
  { table: 'ordering_keys', lanes: false },
  { table: 'dedupe_keys', lanes: false },
  { table: 'job_keys', lanes: false },
];

/** Tables the hot statements touch that have no queue column: global (Citus reference tables, or per cluster). */
export const GLOBAL_TABLES = ['queues', 'rate_limits', 'flows', 'flow_nodes', 'job_dependencies'];

const LANES = [0, 1, 2, 3];

/** A SQL identifier made of what the check itself chose: lower-case letters, digits and underscores. */
function ident(name) {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain identifier: ${name}`);
  return `"${name}"`;
}

/**
 * Builds the layout in `schema` (already migrated) for `queues`; returns a map from each partition's
 * name (queue partitions and their lane leaves) to the queue whose rows it holds.
 */
export async function buildQueueLayout(client, schema, queues) {
  const s = ident(schema);
  for (const queue of queues) ident(queue); // spliced into the partition bounds below
  const partitionQueue = new Map();
  for (const { table, lanes } of QUEUE_TABLES) {
    const old = `${table}_unsharded`;
    const indexes = await client.query(
      `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def, i.indisunique AS is_unique,
              EXISTS (SELECT 1 FROM unnest(i.indkey) AS k(attnum)
                      JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                      WHERE a.attname = 'queue_name') AS has_queue
       FROM pg_index AS i WHERE i.indrelid = $1::regclass`,
      [`${schema}.${table}`],
    );
    await client.query(`ALTER TABLE ${s}.${ident(table)} RENAME TO ${ident(old)}`);
    await client.query(
      `CREATE TABLE ${s}.${ident(table)} (LIKE ${s}.${ident(old)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS
         INCLUDING IDENTITY INCLUDING GENERATED) PARTITION BY LIST (queue_name)`,
    );
    const leaves = [];
    for (const queue of queues) {
      const part = `${table}__${queue}`;
      partitionQueue.set(part, queue);
      await client.query(
        `CREATE TABLE ${s}.${ident(part)} PARTITION OF ${s}.${ident(table)} FOR VALUES IN ('${queue}')${
          lanes ? ' PARTITION BY LIST (lane)' : ''
        }`,
      );
      if (!lanes) {
        leaves.push(part);
        continue;
      }
      for (const lane of LANES) {
        const leaf = `${part}__lane_${lane}`;
        partitionQueue.set(leaf, queue);
        leaves.push(leaf);
        await client.query(
          `CREATE TABLE ${s}.${ident(leaf)} PARTITION OF ${s}.${ident(part)} FOR VALUES IN (${lane})`,
        );
      }
    }
    // The old table's indexes, on the new one: a unique key that holds the queue stays one key
    // over the parent (ON CONFLICT needs it); one that does not (ids) becomes one per leaf, as the
    // lanes' id indexes are. The per-lane unique id indexes of 018 are on leaves, not listed here.
    for (const index of indexes.rows) {
      const match = /^CREATE (UNIQUE )?INDEX (\S+) ON (?:ONLY )?(\S+) (USING .*)$/.exec(index.def);
      if (!match) throw new Error(`unexpected index definition: ${index.def}`);
      const [, unique, , , rest] = match;
      const bare = index.name.replace(/^.*\./, '').replace(/"/g, '');
      if (!unique || index.has_queue) {
        await client.query(
          `CREATE ${unique ?? ''}INDEX ${ident(`${bare}_q`)} ON ${s}.${ident(table)} ${rest}`,
        );
      } else {
        for (const leaf of leaves) {
          await client.query(
            `CREATE UNIQUE INDEX ${ident(`${leaf}_${bare}`.slice(0, 63))} ON ${s}.${ident(leaf)} ${rest}`,
          );
        }
      }
    }
    if (lanes) {
      for (const leaf of leaves) {
        await client.query(`CREATE UNIQUE INDEX ${ident(`${leaf}_id`)} ON ${s}.${ident(leaf)} (id)`);
      }
    }
  }
  await client.query(`ANALYZE ${QUEUE_TABLES.map(({ table }) => `${s}.${ident(table)}`).join(', ')}`);
  return partitionQueue;
}
