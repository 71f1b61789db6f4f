import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { Leasehold, RetryableError } from '../../src/index.js';
import type { OutcomeResult } from '../../src/runtime/outcome-batcher.js';
import { withMaintenanceLock } from '../../src/storage/upkeep/maintenance-lock.js';
import { countByStatus, databaseUrl, migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

/**
 * A pool whose connection "dies" right after the first statement named `statement` committed: the
 * write lands, but its answer never arrives, as when the server or network goes away at that moment.
 */
function answerLosingPool(statement: string): pg.Pool {
  let lost = false;
  class AnswerLosingPool extends pg.Pool {
    override query(config: unknown, values?: unknown): never {
      // Named, or unnamed behind a pooler with the name in a leading comment.
      const { name, text } = (config ?? {}) as { name?: string; text?: string };
      const result = (super.query as (c: unknown, v?: unknown) => Promise<unknown>)(config, values);
      if (lost || !(name ?? text ?? '').includes(statement)) return result as never;
      lost = true;
      return result.then(() => {
        throw new Error('injected: Connection terminated unexpectedly');
      }) as never;
    }
  }
  const pool = new AnswerLosingPool({ connectionString: databaseUrl(), max: 4 });
  pool.on('error', () => {});
  return pool;
}

async function runOneJob(
  statement: string,
  handler: () => Promise<void>,
): Promise<{ lh: Leasehold; result: OutcomeResult; errors: unknown[]; counters: Record<string, number> }> {
  const setup = await migratedClient();
  const pool = answerLosingPool(statement);
  const lh = new Leasehold({ pool, schema: setup.schema });
  const results: OutcomeResult[] = [];
  const errors: unknown[] = [];
  const worker = lh.worker({ queues: { q: { handler, leaseMs: 30_000 } }, recoveryIntervalMs: 0 });
  worker.on('outcome', (_job, result) => results.push(result));
  worker.on('error', (err) => errors.push(err));
  try {
    await lh.enqueue('q', {});
    await started(worker);
    await waitFor(() => results.length > 0, { what: 'the outcome' });
    await worker.stop();
  } finally {
    await pool.end();
  }
  return { lh: setup, result: results[0] as OutcomeResult, errors, counters: { ...worker.counters } };
}

describe('connection loss', () => {
  it('a completion whose answer is lost with its connection is found to have landed: completed, not lost, and never refused', async () => {
    const { lh, result, errors, counters } = await runOneJob('complete_jobs', async () => {});
    expect(String(errors[0])).toMatch(/Connection terminated/);
    expect(result).toBe('completed');
    expect(counters).toMatchObject({ completed: 1, lost: 0 });
    expect(await countByStatus(testPool(), lh.schema)).toEqual({ succeeded: 1 });
    // Not sent a second time: a resent completion would have been fenced out and counted.
    expect(await lh.leaseRefusals()).toEqual([]);
  });

  it('a failure whose answer is lost with its connection is found to have landed: a retry, recorded once', async () => {
    // An explicit retry delay: the jittered backoff can be a few milliseconds, and a second run
    // before the worker stops would fail and be counted too (seen on CI).
    const { lh, result, counters } = await runOneJob('fail_jobs', async () => {
      throw new RetryableError('handler failed', { delayMs: 3_600_000 });
    });
    expect(result).toBe('retry');
    expect(counters).toMatchObject({ retried: 1, lost: 0 });
    expect(await countByStatus(testPool(), lh.schema)).toEqual({ pending: 1 });
    expect(await lh.leaseRefusals()).toEqual([]);
  });

  it('a connection lost while a maintenance batch holds it fails that batch, without crashing the process', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const attempt = withMaintenanceLock(lh.pool, lh.schema, 'retention', async (db) => {
      const { rows } = await db.query<{ pid: number }>({ text: 'SELECT pg_backend_pid() AS pid' });
      await pool.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
      // The client learns of it while idle between statements: an 'error' event nobody awaits.
      await new Promise((resolve) => setTimeout(resolve, 200));
      return 'done';
    });
    await expect(attempt).rejects.toThrow();
    // The lock ended with the dead transaction: the next batch takes it.
    expect(await withMaintenanceLock(lh.pool, lh.schema, 'retention', async () => 'next')).toBe('next');
  });
});
