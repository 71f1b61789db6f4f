import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Leasehold } from '../../src/index.js';
import {
  completeJobs,
  JobCompleteMany,
  JobCompleteManyWithResults,
  JobCompletePlainMany,
  JobCompletePlainManyWithResults,
} from '../../src/storage/leases/complete.js';
import { databaseUrl, migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

// Pay for what you use (issue 28): a batch of plain jobs is completed by a statement with the
// fence, the lane move, the count of refusals and the notices only; the ordering hand-over, the
// key-slot release and the flow release are in the statement for batches that need them.

/** A pool that records the name of every statement it runs (named, or unnamed with its comment). */
class RecordingPool extends pg.Pool {
  readonly names: string[] = [];
  override query(config: unknown, values?: unknown): never {
    const { name, text } = (config ?? {}) as { name?: string; text?: string };
    const label = name ?? /^\/\* (leasehold_\w+) \*\//.exec(text ?? '')?.[1];
    if (label) this.names.push(label);
    return (super.query as (c: unknown, v?: unknown) => never)(config, values);
  }
  completions(): string[] {
    return this.names.filter((n) => n.startsWith('leasehold_complete_jobs'));
  }
}

const FEATURE_TABLES = ['ordering_keys', 'concurrency_keys', 'job_dependencies'];

async function drain(lh: Leasehold, queue: string, count: number): Promise<string[]> {
  const ran: string[] = [];
  const worker = lh.worker({
    queues: { [queue]: { handler: async (job) => void ran.push(job.id), concurrency: 4 } },
  });
  await started(worker);
  try {
    await waitFor(() => ran.length >= count, { what: `${count} jobs of ${queue} to run` });
  } finally {
    await worker.stop();
  }
  return ran;
}

describe('the completion pays for what a batch uses', () => {
  it('the plain statements carry no ordering, key-slot or flow step; the whole ones carry all three', () => {
    for (const plain of [JobCompletePlainMany('s'), JobCompletePlainManyWithResults('s')]) {
      for (const table of FEATURE_TABLES) expect(plain.text).not.toContain(table);
      expect(plain.text).toContain('lease_refusals'); // refusals are still counted
      expect(plain.text).toContain('pg_notify'); // and waiters still told
    }
    for (const whole of [JobCompleteMany('s'), JobCompleteManyWithResults('s')]) {
      for (const table of FEATURE_TABLES) expect(whole.text).toContain(table);
    }
  });

  it('a worker completes plain jobs with the plain statement only, and jobs with an ordering key with the whole one', async () => {
    const setup = await migratedClient();
    const pool = new RecordingPool({ connectionString: databaseUrl(), max: 4 });
    const lh = new Leasehold({ pool, schema: setup.schema });
    try {
      await lh.enqueueMany(
        'plain',
        Array.from({ length: 20 }, (_, i) => ({ payload: { i } })),
      );
      expect(await drain(lh, 'plain', 20)).toHaveLength(20);
      const plainRuns = pool.completions();
      expect(plainRuns.length).toBeGreaterThan(0);
      expect(plainRuns.every((n) => n.startsWith('leasehold_complete_jobs_plain_'))).toBe(true);

      pool.names.length = 0;
      await lh.enqueueMany(
        'keyed',
        [1, 2, 3].map((n) => ({ payload: { n }, orderingKey: 'k' })),
      );
      const order = await drain(lh, 'keyed', 3);
      expect(order).toHaveLength(3);
      // The key was handed over at each completion: all three ran, in enqueue order.
      expect([...order].sort((a, b) => Number(a) - Number(b))).toEqual(order);
      const keyedRuns = pool.completions();
      expect(keyedRuns.length).toBeGreaterThan(0);
      expect(keyedRuns.some((n) => n.startsWith('leasehold_complete_jobs_plain_'))).toBe(false);
    } finally {
      await lh.close();
      await pool.end();
    }
  });

  it('a plain completion of a job that needs a step defers it to the whole statement: the key is handed over', async () => {
    const lh = await migratedClient();
    const [first, second] = (
      await lh.enqueueMany(
        'wrong-flag',
        [1, 2].map((n) => ({ payload: { n }, orderingKey: 'k' })),
      )
    ).ids;
    const [lease] = await lh.claim({ queue: 'wrong-flag', owner: 'w' });
    expect(lease?.jobId).toBe(first);
    // Presented as plain although the job has an ordering key: accepted all the same.
    const accepted = await completeJobs(lh.pool, lh.schema, [{ ...lease!, plain: true }]);
    expect([...accepted]).toEqual([first]);
    expect((await lh.getJob(first!))?.status).toBe('succeeded');
    // The key went to the next job, which is claimable at once.
    const [next] = await lh.claim({ queue: 'wrong-flag', owner: 'w' });
    expect(next?.jobId).toBe(second);
  });

  it('a stale plain completion changes nothing and is counted as a refusal', async () => {
    const lh = await migratedClient();
    const pool = testPool(2);
    const { id } = await lh.enqueue('stale-plain', {});
    const [lease] = await lh.claim({ queue: 'stale-plain', owner: 'w', leaseMs: 60_000 });
    await pool.query(`UPDATE "${lh.schema}".jobs SET lease_token = lease_token + 1 WHERE id = $1`, [id]);
    const accepted = await completeJobs(lh.pool, lh.schema, [{ ...lease!, plain: true }]);
    expect(accepted.size).toBe(0);
    expect((await lh.getJob(id))?.status).toBe('running');
    const { rows } = await pool.query(
      `SELECT refused_count::int AS n FROM "${lh.schema}".lease_refusals WHERE operation = 'complete'`,
    );
    expect(rows).toEqual([{ n: 1 }]);
  });

  it('a plain batch with results stores each result with its finished record', async () => {
    const lh = await migratedClient();
    const { ids } = await lh.enqueueMany('plain-results', [{ payload: 1 }, { payload: 2 }]);
    const leases = await lh.claim({ queue: 'plain-results', owner: 'w', limit: 2 });
    const refs = leases.map((l) => ({
      ...l,
      plain: true,
      result: JSON.stringify({ double: Number(l.payload) * 2 }),
    }));
    expect(await completeJobs(lh.pool, lh.schema, refs)).toEqual(new Set(ids));
    for (const [i, id] of ids.entries()) {
      expect((await lh.getJob(id))?.result).toEqual({ double: (i + 1) * 2 });
    }
  });
});
