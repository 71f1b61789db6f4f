import { Command } from 'commander';
import { describe, expect, it, vi } from 'vitest';
import { adminCommands } from '../../src/cli/admin-commands.js';
import { Interrupt } from '../../src/cli/interrupt.js';
import { AgingService } from '../../src/maintenance/aging.js';
import { databaseUrl, listenOptions, migratedClient, testPool, waitFor } from '../support/db.js';
import { statementsSentOn } from '../support/statement-spy.js';
import { started } from '../support/worker.js';

describe('ordering keys with a worker and the fairness pass', () => {
  it('a worker runs each key in order, woken by the hand-over rather than the poll', async () => {
    const lh = await migratedClient(listenOptions());
    const items = [];
    for (let seq = 0; seq < 8; seq++) {
      for (let k = 0; k < 3; k++) items.push({ payload: { k, seq }, orderingKey: `k${k}` });
    }
    await lh.enqueueMany('ordered', items);
    const next = [0, 0, 0];
    const errors: string[] = [];
    const worker = await started(
      lh.worker({
        queues: {
          ordered: {
            concurrency: 4,
            handler: async (job) => {
              const { k, seq } = job.payload as { k: number; seq: number };
              if (seq !== next[k]) errors.push(`key ${k}: ${seq} before ${next[k]}`);
              next[k] = seq + 1;
            },
          },
        },
        // A poll this slow would take minutes for 8 jobs a key: the completion's NOTIFY wakes it.
        pollIntervalMs: 60_000,
      }),
    );
    await waitFor(() => worker.counters.completed === 24, { what: 'all 24 ordered jobs' });
    expect(errors).toEqual([]);
  });

  it('the fairness pass hands a headless key to its next job, and removes idle keys', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const first = await lh.enqueue('repair', { n: 1 }, { orderingKey: 'orphan' });
    const second = await lh.enqueue('repair', { n: 2 }, { orderingKey: 'orphan' });
    const done = await lh.enqueue('repair', { n: 3 }, { orderingKey: 'finished' });
    // The state a completion leaves when it could not see a job enqueued while it ran: the head is
    // gone, one job waits, and nothing is claimable.
    await pool.query(`DELETE FROM "${lh.schema}".jobs WHERE id = $1`, [first.id]);
    await pool.query(`UPDATE "${lh.schema}".ordering_keys SET head_id = NULL WHERE ordering_key = 'orphan'`);
    const [lease] = await lh.claim({ queue: 'repair', owner: 'w', limit: 5 });
    expect(lease?.jobId).toBe(done.id);
    await lh.complete(lease!);
    expect(await lh.claim({ queue: 'repair', owner: 'w' })).toEqual([]);

    const service = new AgingService({ intervalMs: 1000, db: lh.pool, schema: lh.schema });
    expect(await service.runOnce()).toEqual({ raised: 0, keysReleased: 1, keysRemoved: 1 });
    expect((await lh.claim({ queue: 'repair', owner: 'w' }))[0]?.jobId).toBe(second.id);
    const keys = await pool.query(`SELECT ordering_key FROM "${lh.schema}".ordering_keys`);
    expect(keys.rows).toEqual([{ ordering_key: 'orphan' }]);
  });

  it('a fairness pass pays for what the schema uses: its probe alone without aging or ordering keys, the aging without the key repairs, the repairs once a key exists', async () => {
    const lh = await migratedClient();
    const spy = statementsSentOn(lh.pool);
    const service = new AgingService({ intervalMs: 1000, db: spy.pool, schema: lh.schema });
    await lh.enqueue('plain', { n: 1 });
    expect(await service.runOnce()).toEqual({ raised: 0, keysReleased: 0, keysRemoved: 0 });
    expect(spy.labels()).toEqual(['fairness_pass_probe']);

    await lh.configureQueue('aged', { agingIntervalMs: 1000 });
    const aged = await lh.enqueue('aged', { n: 2 });
    await spy.pool.query(
      `UPDATE "${lh.schema}".jobs SET available_at = now() - interval '2 s' WHERE id = $1`,
      [aged.id],
    );
    spy.clear();
    expect((await service.runOnce()).raised).toBe(1);
    expect(spy.labels()).toEqual(['fairness_pass_probe', 'age_pending_jobs']);

    // An idle key row (its job gone): the repairs run again, and remove it.
    const keyed = await lh.enqueue('keyed', { n: 3 }, { orderingKey: 'k' });
    await spy.pool.query(`DELETE FROM "${lh.schema}".jobs WHERE id = $1`, [keyed.id]);
    await spy.pool.query(`UPDATE "${lh.schema}".ordering_keys SET head_id = NULL, waiting = 0`);
    spy.clear();
    expect((await service.runOnce()).keysRemoved).toBe(1);
    expect(spy.labels()).toEqual([
      'fairness_pass_probe',
      'age_pending_jobs',
      'repair_headless_ordering_keys',
      'repair_scan_ordering_keys',
    ]);
  });

  it('raises long-waiting jobs one step per interval, keeps the enqueued priority, and replay restores it', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool();
    await lh.configureQueue('aging', { agingIntervalMs: 1000, agingMaxBoost: 3 });
    const { ids } = await lh.enqueueMany('aging', [
      { payload: { waited: '2.5 intervals' }, priority: 1 },
      { payload: { waited: '10 intervals' }, priority: 1, maxAttempts: 1 },
      { payload: { waited: 'none' }, priority: 1 },
    ]);
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET available_at = now() - CASE id
         WHEN $1 THEN interval '2500 ms' WHEN $2 THEN interval '10 s' ELSE interval '0' END`,
      [ids[0], ids[1]],
    );
    const service = new AgingService({ intervalMs: 1000, db: lh.pool, schema: lh.schema });
    expect((await service.runOnce()).raised).toBe(2);
    const { rows } = await pool.query(
      `SELECT id::text, priority, base_priority FROM "${lh.schema}".jobs ORDER BY id`,
    );
    expect(rows).toEqual([
      { id: ids[0], priority: 3, base_priority: 1 },
      { id: ids[1], priority: 4, base_priority: 1 }, // capped at 3 steps
      { id: ids[2], priority: 1, base_priority: null },
    ]);
    expect((await service.runOnce()).raised).toBe(0);
    const [lease] = await lh.claim({ queue: 'aging', owner: 'w' });
    expect(lease?.jobId).toBe(ids[1]);
    await lh.fail(lease!, new Error('poison'), { retryable: false });
    await lh.replay([ids[1]!], { reason: 'fixed' });
    expect(await lh.getJob(ids[1]!)).toMatchObject({ priority: 1 });
  });

  it('leasehold queues --blocked lists keys held up by a dead job', async () => {
    const lh = await migratedClient();
    await lh.enqueue('cli', {}, { orderingKey: 'account-7', maxAttempts: 1 });
    await lh.enqueue('cli', {}, { orderingKey: 'account-7' });
    const [lease] = await lh.claim({ queue: 'cli', owner: 'w' });
    await lh.fail(lease!, Object.assign(new Error('bad'), { code: 'BAD_INPUT' }));
    let stdout = '';
    const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      stdout += String(chunk);
      return true;
    });
    const interrupt = new Interrupt();
    try {
      const program = new Command('leasehold');
      for (const command of adminCommands(interrupt)) program.addCommand(command);
      await program.parseAsync([
        'node',
        'leasehold',
        'queues',
        '--blocked',
        '--database-url',
        databaseUrl(),
        '--schema',
        lh.schema,
      ]);
    } finally {
      out.mockRestore();
      interrupt.dispose();
    }
    const [header, row] = stdout.trim().split('\n');
    expect(header).toMatch(/^queue\s+ordering key\s+dead job\s+blocked for\s+waiting\s+error$/);
    expect(row).toMatch(new RegExp(`^cli\\s+account-7\\s+${lease!.jobId}\\s+\\S+\\s+1\\s+BAD_INPUT$`));
  });
});
