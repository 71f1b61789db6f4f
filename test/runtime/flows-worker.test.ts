import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTask, type JobParent, type Lease, PermanentError, ValidationError } from '../../src/index.js';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

// A Queryable that counts the statements sent through it.
function counting(pool: pg.Pool): { client: { query: pg.Pool['query'] }; names: string[] } {
  const names: string[] = [];
  const client = {
    query: ((config: pg.QueryConfig) => {
      // Behind a transaction pooler statements go unnamed, led by a comment naming them.
      names.push(config.name ?? /^\/\* (\S+) \*\//.exec(config.text)?.[1] ?? 'unnamed');
      return pool.query(config);
    }) as pg.Pool['query'],
  };
  return { client, names };
}

describe('a worker runs flows', () => {
  it("job.parents() gives each parent's id, ref, status and result in one query; a 'run' child sees its dead parent", async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool(1);
    const fetched = defineTask('fetch', {
      schema: z.object({ url: z.string() }),
      handler: async () => {},
    });
    const { ids } = await lh.enqueueFlow([
      { ref: 'fetch', task: fetched, payload: { url: 'https://example.com' } },
      { ref: 'broken', queue: 'parents', payload: {} },
      { ref: 'report', queue: 'children', payload: {}, dependsOn: ['fetch', 'broken'], onParentDead: 'run' },
    ]);
    const parentWorker = await started(
      lh.worker({
        tasks: [fetched],
        queues: {
          parents: async () => {
            throw new PermanentError('cannot');
          },
        },
        pollIntervalMs: 20,
      }),
    );
    await waitFor(
      async () =>
        (await lh.getFlow(ids.report as string))?.nodes.every(
          (n) => n.ref === 'report' || n.status === 'succeeded' || n.status === 'dead',
        ),
      { what: 'parents to finish' },
    );
    await parentWorker.stop();
    // Migration 011 has completions store the handler's return value; put one in place here.
    await pool.query(`UPDATE "${lh.schema}".finished_jobs SET result = $2::jsonb WHERE id = $1`, [
      ids.fetch,
      JSON.stringify({ bytes: 1234 }),
    ]);
    let seen: JobParent[] | null = null;
    await started(
      lh.worker({
        queues: {
          children: async (job) => {
            seen = await job.parents();
          },
        },
        pollIntervalMs: 20,
      }),
    );
    await waitFor(async () => (await lh.getJob(ids.report as string))?.status === 'succeeded', {
      what: 'the child to run',
    });
    expect(seen).toEqual([
      { id: ids.fetch, ref: 'fetch', status: 'succeeded', result: { bytes: 1234 } },
      { id: ids.broken, ref: 'broken', status: 'dead', result: null },
    ]);
  });

  it("a parent's return value reaches its child through job.parents(), and the join's own result reaches waitFor", async () => {
    const lh = await migratedClient();
    const { ids } = await lh.enqueueFlow([
      { ref: 'a', queue: 'flow-results', payload: { n: 2 } },
      { ref: 'b', queue: 'flow-results', payload: { n: 3 } },
      { ref: 'sum', queue: 'flow-join', payload: {}, dependsOn: ['a', 'b'] },
    ]);
    const worker = await started(
      lh.worker({
        queues: {
          'flow-results': async (job) => ({ square: (job.payload as { n: number }).n ** 2 }),
          'flow-join': async (job) => {
            const parents = await job.parents();
            return { total: parents.reduce((acc, p) => acc + (p.result as { square: number }).square, 0) };
          },
        },
        pollIntervalMs: 20,
      }),
    );
    const done = await lh.waitFor(ids.sum as string, { timeoutMs: 20_000 });
    await worker.stop();
    // Stored by the parents' fenced completions, read by the child: 4 + 9, never set by hand.
    expect(done).toEqual({ id: ids.sum, status: 'succeeded', result: { total: 13 } });
    expect((await lh.getJob(ids.a as string))?.result).toEqual({ square: 4 });
  });

  it("a task node's payload is checked by its schema before anything is written", async () => {
    const lh = await migratedClient();
    const task = defineTask('typed', { schema: z.object({ n: z.number() }), handler: async () => {} });
    const error = await lh
      .enqueueFlow([
        { ref: 'ok', queue: 'q', payload: {} },
        { ref: 'bad', task, payload: { n: 'one' }, dependsOn: ['ok'] },
      ])
      .catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toMatch(/nodes\[1\]\.payload/);
    const pool = testPool(1);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".jobs`);
    expect(rows[0].n).toBe(0);
  });

  it('fans out to 10,000 children and back in to one join: one statement releases them all, and the join runs once, last', async () => {
    const lh = await migratedClient({ poolSize: 8 });
    const pool = testPool(2);
    const children = 10_000;
    const nodes = [
      { ref: 'root', queue: 'fan-root', payload: {} },
      ...Array.from({ length: children }, (_, i) => ({
        ref: `child-${i}`,
        queue: 'fan-children',
        payload: { i },
        dependsOn: ['root'],
      })),
      {
        ref: 'join',
        queue: 'fan-join',
        payload: {},
        dependsOn: Array.from({ length: children }, (_, i) => `child-${i}`),
      },
    ];
    const { ids } = await lh.enqueueFlow(nodes);
    // The root's completion, through a counting client: one statement releases 10,000 children.
    const [root] = await lh.claim({ queue: 'fan-root', owner: 'w' });
    const { client, names } = counting(pool);
    expect(await lh.complete(root as Lease, { client })).toBe(true);
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^leasehold_complete_jobs_/);
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".jobs
       WHERE queue_name = 'fan-children' AND status = 'pending' AND waiting_parents = 0`,
    );
    expect(rows[0].n).toBe(children);

    let childRuns = 0;
    let joinRuns = 0;
    let childrenDoneAtJoin = -1;
    await started(
      lh.worker({
        queues: {
          'fan-children': { concurrency: 50, prefetch: 500, handler: async () => void childRuns++ },
          'fan-join': async () => {
            joinRuns++;
            const { rows: left } = await pool.query(
              `SELECT count(*)::int AS n FROM "${lh.schema}".jobs WHERE queue_name = 'fan-children'`,
            );
            childrenDoneAtJoin = left[0].n;
          },
        },
        pollIntervalMs: 20,
      }),
    );
    await waitFor(async () => (await lh.getJob(ids.join as string))?.status === 'succeeded', {
      timeoutMs: 60_000,
      what: 'the join to succeed',
    });
    expect(joinRuns).toBe(1);
    expect(childRuns).toBe(children);
    // Every child had left the jobs table (succeeded) when the join ran.
    expect(childrenDoneAtJoin).toBe(0);
    // 10,000 jobs run through a worker: room for the wait above (60 s) on a loaded machine, where
    // the default 30 s ended the test before its own wait did.
  }, 120_000);
});
