import { describe, expect, it } from 'vitest';
import { databaseUrl, directDatabaseUrl, pooled } from '../support/db.js';

// The check behind `npm run check:pruning` (scripts/check-queue-pruning.mjs, docs/scaling.md): with
// the hot tables LIST-partitioned by queue, each hot statement of the library, as it sends it,
// touches the partitions of one queue (the sweep: of one shard's queues), in custom and generic plans.

interface PruningRow {
  operation: string;
  statement: string;
  mode: string;
  ok: boolean;
  known: boolean;
  pruning: string;
  queues: string[];
  foreign: string[];
}
const check = (await import('../../scripts/queue-pruning/check.mjs' as string)) as {
  checkQueuePruning(options: {
    connectionString: string;
    extra?: { name: string; text: string; values: unknown[] }[];
  }): Promise<{ ok: boolean; rows: PruningRow[] }>;
};

describe('queue pruning', () => {
  it('every hot statement touches one queue, and a statement that looks jobs up by id alone is caught', async () => {
    // PREPARE and EXPLAIN of a prepared statement need one session: the server itself, not the pooler.
    const connectionString = pooled() ? directDatabaseUrl() : databaseUrl();
    const result = await check.checkQueuePruning({
      connectionString,
      extra: [
        {
          name: 'lookup by id alone',
          // The schema is the check's scratch one: the statement names the parent unqualified.
          text: 'SELECT id FROM jobs WHERE id = ANY ($1::bigint[])',
          values: [['1', '2', '3']],
        },
      ],
    });
    const byOperation = (name: string) => result.rows.filter((row) => row.operation === name);

    for (const name of [
      'enqueue',
      'enqueueMany',
      'claim',
      'heartbeat',
      'complete',
      'fail',
      'fail (dead)',
      'flow release',
      'replay (queue filter)',
      'replay (listed, queue known)',
    ]) {
      const rows = byOperation(name);
      expect(rows.length, name).toBeGreaterThan(0);
      // Each statement the operation sends (a replay: the count, then the batches), in both plans.
      for (const statement of new Set(rows.map((row) => row.statement))) {
        const modes = rows.filter((row) => row.statement === statement).map((row) => row.mode);
        expect(modes.sort(), `${name} ${statement}`).toEqual(['custom', 'generic']);
      }
      for (const row of rows) {
        expect(row.queues, `${name} ${row.mode}`).toEqual(['alpha']);
        expect(row.ok).toBe(true);
      }
    }
    // A replay with a queue runs its queue's own statements, which name it without an OR.
    expect(new Set(byOperation('replay (queue filter)').map((row) => row.statement))).toEqual(
      new Set(['count_dead_in_queue', 'replay_batch_in_queue']),
    );
    // A flow whose children are in alpha and beta: its release reaches those two queues (each
    // child in its own, migration 019), never gamma.
    const spanning = byOperation('flow release (children in two queues)');
    expect(spanning.map((row) => row.mode).sort()).toEqual(['custom', 'generic']);
    for (const row of spanning) {
      expect(row.queues, row.mode).toEqual(['alpha', 'beta']);
      expect(row.ok).toBe(true);
    }

    // The sweep spans queues by design: each shard's server sweeps its own, and touches only those.
    const sweeps = byOperation('recovery sweep');
    expect(sweeps).toHaveLength(4);
    for (const row of sweeps) expect(row.ok, `${row.statement} ${row.mode}`).toBe(true);
    expect(new Set(sweeps.map((row) => row.queues.join('+')))).toEqual(new Set(['alpha+beta', 'gamma']));

    const fanning = byOperation('lookup by id alone');
    expect(fanning).toHaveLength(2);
    for (const row of fanning) {
      expect(row.ok).toBe(false);
      expect(row.known).toBe(false);
      expect(row.queues).toEqual(['alpha', 'beta', 'gamma']);
      expect(row.foreign).toContain('jobs__beta__lane_0');
    }
    expect(result.ok).toBe(false);

    const unexpected = result.rows.filter(
      (row) => !row.ok && !row.known && row.operation !== 'lookup by id alone',
    );
    expect(unexpected).toEqual([]);
    // No operation is excused: every fan-out fails the check.
    expect(result.rows.filter((row) => row.known)).toEqual([]);
  }, 60_000);
});
