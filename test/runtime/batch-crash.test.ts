import { describe, expect, it } from 'vitest';
import type { BatchJobContext } from '../../src/index.js';
import { countByStatus, migratedClient, testPool, waitFor } from '../support/db.js';
import { forkWorker, killHard, started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

describe('a batch worker killed mid-batch', () => {
  it('loses no job: the batch in flight is recovered from its leases and run again elsewhere', async () => {
    const lh = await migratedClient({ backoff: noBackoff });
    const pool = testPool();
    await lh.enqueueMany(
      'bulk',
      Array.from({ length: 300 }, (_, i) => ({ payload: i })),
    );
    const victim = await forkWorker({
      schema: lh.schema,
      queue: 'bulk',
      mode: 'batch-slow',
      batchSize: 20,
      concurrency: 40,
      sleepMs: 60,
      leaseMs: 800,
      owner: 'victim',
    });
    await waitFor(() => victim.messages.filter((m) => m.type === 'done').length >= 3, {
      what: 'three batches done',
    });
    // Kill it as a batch starts (its handler then sleeps 60 ms): it surely dies holding that batch's leases.
    const seen = victim.messages.length;
    await waitFor(() => victim.messages.slice(seen).some((m) => m.type === 'begin'), {
      what: 'a batch starting',
    });
    await killHard(victim.child);
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE lease_owner = 'victim'`,
    );
    expect(rows[0].n).toBeGreaterThan(0); // it died holding leases

    const survivor = lh.worker({
      owner: 'survivor',
      queues: { bulk: { batch: { size: 50 }, handler: async (_jobs: BatchJobContext[]) => {} } },
      recoveryIntervalMs: 100,
      pollIntervalMs: 50,
    });
    await started(survivor);
    await waitFor(async () => (await countByStatus(pool, lh.schema)).succeeded === 300, {
      timeoutMs: 30_000,
      what: 'all 300 succeeded',
    });
    expect(await countByStatus(pool, lh.schema)).toEqual({ succeeded: 300 });
    const attempts = await pool.query(
      `SELECT max(attempt_count)::int AS most, count(*) FILTER (WHERE attempt_count = 2)::int AS retried
       FROM "${lh.schema}".finished_jobs`,
    );
    expect(attempts.rows[0].most).toBe(2);
    expect(attempts.rows[0].retried).toBe(rows[0].n);
  });
});
