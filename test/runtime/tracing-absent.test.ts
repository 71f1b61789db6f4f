import { describe, expect, it, vi } from 'vitest';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

// As if @opentelemetry/api were not installed: importing it fails.
vi.mock('@opentelemetry/api', () => {
  throw new Error("Cannot find package '@opentelemetry/api'");
});

describe('without @opentelemetry/api', () => {
  it('enqueues and runs jobs as usual', async () => {
    const { loadOtel } = await import('../../src/observability/tracing.js');
    expect(await loadOtel()).toBeNull();
    const lh = await migratedClient();
    const { id } = await lh.enqueue('untraced', { n: 1 });
    const worker = lh.worker({ queues: { untraced: async () => {} } });
    await started(worker);
    await waitFor(() => worker.counters.completed === 1, { what: 'the job' });
    const { rows } = await testPool(1).query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".finished_jobs WHERE id = $1`,
      [id],
    );
    expect(rows[0].n).toBe(1);
  });
});
