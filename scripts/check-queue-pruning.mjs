// `npm run check:pruning`: checks that every hot statement of Leasehold touches the partitions of
// one queue only when the hot tables are LIST-partitioned by queue (the stand-in for a table
// distributed by queue over shards, or for queues split across clusters; see docs/scaling.md).
// Uses DATABASE_URL, or starts an embedded PostgreSQL of its own. Exits 1, naming the statement
// and the partitions, when a statement fans out.
import { startEmbeddedPostgres } from '../dist/index.js';
import { checkQueuePruning, formatPruningTable } from './queue-pruning/check.mjs';

const log = (message) => console.error(`[pruning] ${message}`);

async function main() {
  const embedded = process.env.DATABASE_URL ? null : await startEmbeddedPostgres();
  const connectionString = process.env.DATABASE_URL ?? embedded.connectionString;
  try {
    const result = await checkQueuePruning({ connectionString, log });
    console.log(formatPruningTable(result.rows));
    const fanning = result.rows.filter((row) => !row.ok && !row.known);
    const known = result.rows.filter((row) => row.known);
    for (const row of fanning) {
      console.error(
        `FANS OUT: ${row.operation} (${row.statement}, ${row.mode} plan) touched ${row.foreign.join(', ')}`,
      );
    }
    console.error(
      fanning.length === 0
        ? `[pruning] ${result.rows.length - known.length} of ${result.rows.length} plans touched one queue's (or one shard's) partitions; ${known.length} known to fan out (docs/scaling.md)`
        : `[pruning] ${fanning.length} of ${result.rows.length} plans fan out unexpectedly`,
    );
    process.exitCode = fanning.length === 0 ? 0 : 1;
  } finally {
    await embedded?.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 2;
});
