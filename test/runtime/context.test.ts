import { describe, expect, it } from 'vitest';
import { closeContext, resolveContext } from '../../src/context/context.js';
import { startDashboard, Worker } from '../../src/index.js';
import { AgingService } from '../../src/maintenance/aging.js';
import { RecoveryService } from '../../src/maintenance/recovery.js';
import { RetentionService } from '../../src/maintenance/retention.js';
import { enqueue } from '../../src/operations/producer/enqueue.js';
import { claim } from '../../src/operations/worker/leases.js';
import { databaseUrl, expireLease, listenOptions, migratedClient, waitFor } from '../support/db.js';

// The seam of issue 12: the worker, the maintenance services and the dashboard are built from a
// resolved context, with no Leasehold client in sight.

describe('the resolved context', () => {
  it('a worker built from a context alone runs jobs to completion', async () => {
    const { schema } = await migratedClient(); // creates and later drops the schema
    const context = resolveContext({ connectionString: databaseUrl(), schema, ...listenOptions() });
    try {
      const { id } = await enqueue(context, 'ctx', { n: 1 });
      const seen: unknown[] = [];
      const worker = new Worker(context, {
        queues: { ctx: async (job) => void seen.push(job.payload) },
        pruneIntervalMs: 0,
      });
      await worker.start();
      await waitFor(() => worker.counters.completed === 1 || null, { what: 'the job completes' });
      await worker.stop();
      expect(seen).toEqual([{ n: 1 }]);
      const { rows } = await context.pool.query(`SELECT 1 FROM "${schema}".finished_jobs WHERE id = $1`, [
        id,
      ]);
      expect(rows).toHaveLength(1);
    } finally {
      await closeContext(context);
    }
  });

  it('the three maintenance services take the same input, built from a context', async () => {
    const { schema } = await migratedClient();
    const context = resolveContext({ connectionString: databaseUrl(), schema, succeededRetentionMs: 0 });
    try {
      const base = { intervalMs: 60_000, db: context.pool, schema: context.schema };
      await enqueue(context, 'sweep', {});
      const [lease] = await claim(context, { queue: 'sweep', owner: 'crashed' });
      await expireLease(context.pool, schema, lease!.jobId);
      const recovery = new RecoveryService({ ...base, backoff: { baseMs: 0, maxMs: 0 } });
      expect(await recovery.runOnce()).toEqual({ retried: 1, dead: 0 });
      const retention = new RetentionService({ ...base, succeededRetentionMs: context.succeededRetentionMs });
      expect((await retention.runOnce()).skipped).toBe(false);
      const aging = new AgingService(base);
      expect(await aging.runOnce()).toEqual({ raised: 0, keysReleased: 0, keysRemoved: 0 });
    } finally {
      await closeContext(context);
    }
  });

  it('the dashboard serves from a context, and a client no longer exposes its listen connection', async () => {
    const lh = await migratedClient();
    const context = resolveContext({ connectionString: databaseUrl(), schema: lh.schema });
    try {
      const dashboard = await startDashboard(context, { port: 0 });
      try {
        const response = await fetch(`${dashboard.url}/api/overview`);
        expect(response.status).toBe(200);
        expect(await response.json()).toHaveProperty('queues');
      } finally {
        await dashboard.close();
      }
    } finally {
      await closeContext(context);
    }
    expect('listenConnection' in lh).toBe(false);
    expect(Object.keys(lh)).not.toContain('listenConnection');
  });
});
