import { describe, expect, it } from 'vitest';
import { isLeaseholdError, ValidationError } from '../../src/index.js';
import { completeJobs } from '../../src/storage/leases/complete.js';
import { countByStatus, expireLease, migratedClient, testPool, waitFor } from '../support/db.js';
import { rejection } from '../support/hostile.js';
import { finishedSince } from '../support/job-states.js';
import { started } from '../support/worker.js';

// A worker's logger that keeps every line it is given, to prove what is never logged.
function recordingLogger() {
  const lines: string[] = [];
  const log = (...args: unknown[]) => {
    lines.push(JSON.stringify(args));
  };
  return { lines, logger: { info: log, warn: log, error: log, debug: log } };
}

describe("a handler's return value is the job's result", () => {
  it('is stored by the completion and returned by getJob; a handler returning nothing leaves null', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('results', { n: 2 });
    const { id: quiet } = await lh.enqueue('quiet', {});
    await started(
      lh.worker({
        queues: {
          results: async (job) => ({ doubled: (job.payload as { n: number }).n * 2, at: new Date(0) }),
          quiet: async () => undefined,
        },
      }),
    );
    const job = await waitFor(async () => {
      const found = await lh.getJob(id);
      return found?.status === 'succeeded' ? found : null;
    });
    // The JSON form: a Date comes back as its ISO string.
    expect(job.result).toEqual({ doubled: 4, at: '1970-01-01T00:00:00.000Z' });
    expect(job.payload).toBeNull();
    const plain = await waitFor(async () => {
      const found = await lh.getJob(quiet);
      return found?.status === 'succeeded' ? found : null;
    });
    expect(plain.result).toBeNull();
    const { rows } = await testPool().query(`SELECT result FROM "${lh.schema}".finished_jobs WHERE id = $1`, [
      quiet,
    ]);
    expect(rows[0].result).toBeNull(); // SQL NULL, not JSON null
  });

  it('is the value job.transaction returns, committed with the completion', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('tx', {});
    await started(
      lh.worker({
        queues: {
          tx: async (job) => {
            const answer = await job.transaction(async (client) => {
              const { rows } = await client.query('SELECT 41 + 1 AS n');
              return { n: rows[0].n as number };
            });
            return { ignored: answer }; // the completion already carried the transaction's value
          },
        },
      }),
    );
    const job = await waitFor(async () => {
      const found = await lh.getJob(id);
      return found?.status === 'succeeded' ? found : null;
    });
    expect(job.result).toEqual({ n: 42 });
  });

  it('too large fails the attempt as permanent: dead with RESULT_TOO_LARGE, no result stored, nothing logged', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const secret = `secret-${'x'.repeat(200)}`;
    const { id } = await lh.enqueue('big', {}, { maxAttempts: 5 });
    const { lines, logger } = recordingLogger();
    await started(lh.worker({ queues: { big: async () => ({ secret }) }, maxResultBytes: 100, logger }));
    const job = await waitFor(async () => {
      const found = await lh.getJob(id);
      return found?.status === 'dead' ? found : null;
    });
    expect(job.lastErrorCode).toBe('RESULT_TOO_LARGE');
    expect(job.attemptCount).toBe(1); // permanent: no retry spent
    expect(job.lastErrorMessage).toMatch(/over the limit of 100/);
    expect(job.lastErrorMessage).not.toContain('secret');
    expect(job.result).toBeNull();
    expect(await countByStatus(pool, lh.schema)).toEqual({ dead: 1 });
    await waitFor(() => lines.length > 0, { what: 'the worker to log the death' });
    expect(lines.join('\n')).not.toContain(secret);
  });

  it('a value JSON cannot hold (a cycle, a NUL character) fails the attempt as permanent with RESULT_NOT_JSON; a BigInt is stored as text', async () => {
    const lh = await migratedClient();
    const { id: cycle } = await lh.enqueue('odd', { kind: 'cycle' });
    const { id: nul } = await lh.enqueue('odd', { kind: 'nul' });
    const { id: bigint } = await lh.enqueue('odd', { kind: 'bigint' });
    await started(
      lh.worker({
        queues: {
          odd: async (job) => {
            const kind = (job.payload as { kind: string }).kind;
            if (kind === 'bigint') return { rows: 1n };
            if (kind === 'nul') return { text: 'a\u0000b' };
            const looped: { self?: unknown } = {};
            looped.self = looped;
            return looped;
          },
        },
      }),
    );
    for (const id of [cycle, nul]) {
      const job = await waitFor(async () => {
        const found = await lh.getJob(id);
        return found?.status === 'dead' ? found : null;
      });
      expect(job.lastErrorCode).toBe('RESULT_NOT_JSON');
      expect(job.attemptCount).toBe(1);
    }
    const done = await waitFor(async () => {
      const found = await lh.getJob(bigint);
      return found?.status === 'succeeded' ? found : null;
    });
    expect(done.result).toEqual({ rows: '1' });
  });

  it("a stale worker's completion with a result stores nothing; the current holder's does", async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue('stale', {});
    const [first] = await lh.claim({ queue: 'stale', owner: 'worker-a', leaseMs: 60_000 });
    await expireLease(pool, lh.schema, id);
    await lh.recoverExpired({ backoff: { baseMs: 1, maxMs: 1 } });
    const second = await waitFor(async () => (await lh.claim({ queue: 'stale', owner: 'worker-b' }))[0]);
    expect(second.token).not.toBe(first!.token);

    const refused = await completeJobs(lh.pool, lh.schema, [{ ...first!, result: '{"from":"a"}' }]);
    expect(refused.size).toBe(0);
    expect((await lh.getJob(id))?.status).toBe('running');
    const { rows: none } = await pool.query(`SELECT 1 FROM "${lh.schema}".finished_jobs WHERE id = $1`, [id]);
    expect(none).toHaveLength(0);

    const accepted = await completeJobs(lh.pool, lh.schema, [{ ...second, result: '{"from":"b"}' }]);
    expect([...accepted]).toEqual([id]);
    expect((await lh.getJob(id))?.result).toEqual({ from: 'b' });
  });

  it('a batch mixing jobs with and without results stores each its own', async () => {
    const lh = await migratedClient();
    await lh.enqueueMany(
      'mixed',
      Array.from({ length: 6 }, (_, i) => ({ payload: { i } })),
    );
    const leases = await lh.claim({ queue: 'mixed', owner: 'batcher', limit: 6 });
    // The client's pool: it runs statements unnamed behind a transaction-mode pooler.
    const accepted = await completeJobs(
      lh.pool,
      lh.schema,
      leases.map((lease, i) => (i % 2 === 0 ? { ...lease, result: JSON.stringify({ i }) } : lease)),
    );
    expect(accepted.size).toBe(6);
    for (const [i, lease] of leases.entries()) {
      expect((await lh.getJob(lease.jobId))?.result).toEqual(i % 2 === 0 ? { i } : null);
    }
  });

  it('is kept under succeeded-job retention, and pruned with the finished record', async () => {
    const lh = await migratedClient({ succeededRetentionMs: 60_000 });
    const pool = testPool();
    const { id } = await lh.enqueue('kept', {});
    await started(lh.worker({ queues: { kept: async () => ({ kept: true }) } }));
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded');
    expect(await lh.prune()).toMatchObject({ succeeded: 0 });
    expect((await lh.getJob(id))?.result).toEqual({ kept: true });
    await finishedSince(pool, lh.schema, 120_000, { succeeded: true });
    expect(await lh.prune()).toMatchObject({ succeeded: 1 });
    expect(await lh.getJob(id)).toBeNull();
  });
});

describe('job.progress(detail) is stored with the next lease renewal', () => {
  it('shows the latest detail in getJob(id).progress while the job runs, in the renewal statement', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('progress', {});
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let reported!: (value: boolean[]) => void;
    const answers = new Promise<boolean[]>((resolve) => {
      reported = resolve;
    });
    await started(
      lh.worker({
        queues: {
          progress: {
            // A long lease: only the detail makes a renewal due this soon.
            leaseMs: 60_000,
            renew: 'progress',
            handler: async (job) => {
              const first = await job.progress({ step: 1, of: 3 });
              const second = await job.progress({ step: 2, of: 3 });
              reported([first, second]);
              await released;
            },
          },
        },
      }),
    );
    expect(await answers).toEqual([true, true]);
    const running = await waitFor(
      async () => {
        const found = await lh.getJob(id);
        return found?.progress !== null ? found : null;
      },
      { what: 'the progress detail to be stored' },
    );
    expect(running.status).toBe('running');
    expect(running.progress).toEqual({ step: 2, of: 3 }); // the latest wins; the first was never sent
    const { rows } = await testPool().query(
      `SELECT lease_extensions FROM "${lh.schema}".jobs WHERE id = $1`,
      [id],
    );
    expect(rows[0].lease_extensions).toBe(1); // one renewal carried it
    release();
    await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded');
  });

  it('a detail over maxProgressBytes, or not JSON, rejects with a ValidationError and stores nothing', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('bounded', {});
    let errors!: (value: unknown[]) => void;
    const refused = new Promise<unknown[]>((resolve) => {
      errors = resolve;
    });
    await started(
      lh.worker({
        maxProgressBytes: 64,
        queues: {
          bounded: async (job) => {
            const caught: unknown[] = [];
            caught.push(await rejection(job.progress({ text: 'y'.repeat(100) })));
            caught.push(await rejection(job.progress({ n: 1n })));
            await job.progress({ small: true });
            errors(caught);
            return 'done';
          },
        },
      }),
    );
    const [tooLarge, notJson] = await refused;
    expect(tooLarge).toBeInstanceOf(ValidationError);
    expect((tooLarge as ValidationError).field).toBe('detail');
    expect((tooLarge as Error).message).toMatch(/over the limit of 64/);
    expect(isLeaseholdError(notJson, 'VALIDATION')).toBe(true);
    const job = await waitFor(async () => {
      const found = await lh.getJob(id);
      return found?.status === 'succeeded' ? found : null;
    });
    expect(job.result).toBe('done');
  });

  it('a renewal refused by the fence stores no detail', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const { id } = await lh.enqueue('fenced-progress', {});
    const [lease] = await lh.claim({ queue: 'fenced-progress', owner: 'old' });
    await expireLease(pool, lh.schema, id);
    const { extendLeases } = await import('../../src/storage/leases/heartbeat.js');
    const extended = await extendLeases(lh.pool, lh.schema, [
      { ...lease!, leaseMs: 10_000, progress: '{"late":true}' },
    ]);
    expect(extended.size).toBe(0);
    expect((await lh.getJob(id))?.progress).toBeNull();
  });
});

describe('worker options of results and progress', () => {
  it('refuses bounds out of range with a ValidationError naming the option', async () => {
    const lh = await migratedClient();
    for (const [option, value] of [
      ['maxResultBytes', 1],
      ['maxResultBytes', 9 * 1024 * 1024],
      ['maxProgressBytes', 1.5],
    ] as const) {
      const err = (() => {
        try {
          lh.worker({ queues: { q: async () => {} }, [option]: value });
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).field).toBe(option);
    }
  });
});
