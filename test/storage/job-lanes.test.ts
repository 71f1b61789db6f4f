import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/index.js';
import { fenceArrays } from '../../src/storage/fence.js';
import { finishedChannel } from '../../src/storage/finish-notices.js';
import { wakeupChannel } from '../../src/storage/jobs/enqueue.js';
import { JobClaimMany, newClaimId } from '../../src/storage/leases/claim.js';
import { JobCompleteMany } from '../../src/storage/leases/complete.js';
import { migratedClient, testPool } from '../support/db.js';
import { dueLane, putInLane, waitUntilBlockedBy } from '../support/lanes.js';
import { type PlanNode, planNodes } from '../support/plans.js';
import { schemaRole } from '../support/roles.js';

// The jobs table's lanes (migration 018, docs/storage.md): new jobs go to the lane of the current
// ten-second window; the rotation empties the lane due next by moving what is left and truncating it.

const pool = testPool(8);

async function receivingLane(db: pg.Pool): Promise<number> {
  const { rows } = await db.query<{ lane: number }>(
    `SELECT 1 + (floor(extract(epoch FROM now()) / 10)::bigint % 3) AS lane`,
  );
  return Number(rows[0]?.lane);
}

async function laneSize(db: pg.Pool, schema: string, lane: number): Promise<number> {
  const { rows } = await db.query<{ size: string }>(`SELECT pg_relation_size($1::regclass) AS size`, [
    `"${schema}".jobs_lane_${lane}`,
  ]);
  return Number(rows[0]?.size);
}

/** Every column of the given jobs but the lane, by id. */
async function jobRows(db: pg.Pool, schema: string, ids: string[]): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `SELECT to_jsonb(j) - 'lane' AS job FROM "${schema}".jobs AS j WHERE id = ANY ($1::bigint[]) ORDER BY id`,
    [ids],
  );
  return rows.map((row) => row.job);
}

async function lanesOf(db: pg.Pool, schema: string, ids: string[]): Promise<Record<string, number>> {
  const { rows } = await db.query<{ id: string; lane: number }>(
    `SELECT id::text, lane FROM "${schema}".jobs WHERE id = ANY ($1::bigint[])`,
    [ids],
  );
  return Object.fromEntries(rows.map((row) => [row.id, row.lane]));
}

describe('job lanes', () => {
  it('a new job goes to the lane of the current window', async () => {
    const lh = await migratedClient();
    const before = await receivingLane(pool);
    const { id } = await lh.enqueue('lanes', { n: 1 });
    const after = await receivingLane(pool);
    const lane = (await lanesOf(pool, lh.schema, [id]))[id];
    expect([before, after]).toContain(lane);
  });

  it('the rotation moves what is left in the due lane, keeping every column, and truncates it', async () => {
    const lh = await migratedClient();
    const { id: running } = await lh.enqueue('lanes', { kind: 'running' });
    const [lease] = await lh.claim({ queue: 'lanes', owner: 'lanes-test', leaseMs: 60_000 });
    expect(lease?.jobId).toBe(running);
    const { id: pending } = await lh.enqueue('lanes', { kind: 'pending' });
    const { id: dead } = await lh.enqueue('lanes-dead', { kind: 'dead' }, { maxAttempts: 1 });
    const [doomed] = await lh.claim({ queue: 'lanes-dead', owner: 'lanes-test' });
    if (!doomed) throw new Error('no lease');
    expect(await lh.fail(doomed, new PermanentError('gone', { code: 'GONE' }))).toBe('dead');
    const { id: later } = await lh.enqueue('lanes', { kind: 'later' }, { delayMs: 3_600_000 });
    const { id: head } = await lh.enqueue('lanes-ordered', { kind: 'head' }, { orderingKey: 'k' });
    const { id: behind } = await lh.enqueue('lanes-ordered', { kind: 'behind' }, { orderingKey: 'k' });
    const ids = [running, pending, dead, later, head, behind];

    const due = await dueLane(pool);
    await putInLane(pool, lh.schema, ids, due);
    const before = await jobRows(pool, lh.schema, ids);
    expect(await laneSize(pool, lh.schema, due)).toBeGreaterThan(0);

    const result = await lh.rotateLanes();
    expect(result.moved).toBe(ids.length);
    expect(result.truncated).toContain(`jobs_lane_${due}`);
    expect(await laneSize(pool, lh.schema, due)).toBe(0);
    // Every job is still there, unchanged but for its lane: id, token, claim id, attempts, errors.
    expect(await jobRows(pool, lh.schema, ids)).toEqual(before);
    const receiving = await receivingLane(pool);
    expect(await lanesOf(pool, lh.schema, ids)).toEqual({
      [running]: receiving, // work in flight goes where jobs are received now
      [pending]: 0, // the rest waits in the cold lane, moved once
      [head]: 0,
      [dead]: 0,
      [later]: 0,
      [behind]: 0,
    });
    // The moved lease is the same lease: its completion is accepted once.
    expect(await lh.completeMany([lease as NonNullable<typeof lease>])).toEqual(new Set([running]));
    expect(await lh.completeMany([lease as NonNullable<typeof lease>])).toEqual(new Set());
  });

  it('a completion that read a row just before the rotation moved it is sent again and accepted; a stale lease is still refused', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const { id } = await lh.enqueue('lanes-race', { n: 1 });
    const [stale] = await lh.claim({ queue: 'lanes-race', owner: 'first', leaseMs: 60_000 });
    await pool.query(
      `UPDATE "${lh.schema}".jobs SET lease_expires_at = now() - interval '1 ms' WHERE id = $1`,
      [id],
    );
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    const [live] = await lh.claim({ queue: 'lanes-race', owner: 'second', leaseMs: 60_000 });
    if (!stale || !live) throw new Error('no lease');

    const due = await dueLane(pool);
    await putInLane(pool, lh.schema, [id], due);
    const mover = await pool.connect();
    try {
      // The rotation's move, held open: the row is locked and moved, not yet committed.
      await mover.query('BEGIN');
      const moved = await mover.query(`SELECT moved FROM "${lh.schema}".move_job_lane_rows(100)`);
      expect(Number(moved.rows[0].moved)).toBe(1);
      const xid = (await mover.query('SELECT txid_current()::text AS xid')).rows[0].xid;
      const completion = lh.completeMany([live]);
      await waitUntilBlockedBy(pool, xid);
      await mover.query('COMMIT');
      // It read the row's old version: PostgreSQL refuses it (40001) and it is sent again.
      expect(await completion).toEqual(new Set([id]));
    } finally {
      mover.release();
    }
    expect(await lh.completeMany([stale])).toEqual(new Set());
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".finished_jobs WHERE id = $1`,
      [id],
    );
    expect(rows[0].n).toBe(1);
  });

  it('completions and claims racing the rotation lose nothing and complete each job once', async () => {
    const lh = await migratedClient({ poolSize: 12 });
    const total = 3000;
    await lh.enqueueMany(
      'lanes-busy',
      Array.from({ length: total }, (_, i) => ({ payload: { i } })),
    );
    const leases = [
      ...(await lh.claim({ queue: 'lanes-busy', owner: 'busy', limit: 1000, leaseMs: 60_000 })),
      ...(await lh.claim({ queue: 'lanes-busy', owner: 'busy', limit: 500, leaseMs: 60_000 })),
    ];
    expect(leases).toHaveLength(1500);
    const due = await dueLane(pool);
    // Nothing else runs yet: one pass moves every row out of the due lane (the running ones to
    // the receiving lane, the rest to the cold lane). Then back into it, for the race.
    await pool.query(`UPDATE "${lh.schema}".jobs SET lane = $1`, [due]);
    expect((await lh.rotateLanes()).moved).toBe(total);
    await pool.query(`UPDATE "${lh.schema}".jobs SET lane = $1`, [due]);

    let rotating = true;
    const rotation = (async () => {
      while (rotating) await lh.rotateLanes();
    })();
    const completed = new Set<string>();
    const batches = [];
    for (let i = 0; i < leases.length; i += 100) batches.push(leases.slice(i, i + 100));
    // Claims skip rows the rotation holds locked while it moves them (SKIP LOCKED), so an empty
    // claim does not mean none is left: the claimer goes on until it has the other 1,500.
    const claimer = (async () => {
      const claimed = [];
      const deadline = Date.now() + 30_000;
      while (claimed.length < total - leases.length && Date.now() < deadline) {
        const more = await lh.claim({ queue: 'lanes-busy', owner: 'busy-2', limit: 100, leaseMs: 60_000 });
        claimed.push(...more);
        if (more.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return claimed;
    })();
    try {
      const answers = await Promise.all(batches.map((batch) => lh.completeMany(batch)));
      const rest = await claimer;
      for (let i = 0; i < rest.length; i += 500) answers.push(await lh.completeMany(rest.slice(i, i + 500)));
      for (const answer of answers) for (const id of answer) completed.add(id);
    } finally {
      rotating = false;
      await rotation;
    }

    // Under load the race may end before the rotation's first statement of it does (the pass
    // above showed it moves): what is checked here is that the race lost nothing.
    expect(completed.size).toBe(total);
    const { rows } = await pool.query(
      `SELECT (SELECT count(*)::int FROM "${lh.schema}".jobs) AS live,
              (SELECT count(*)::int FROM "${lh.schema}".finished_jobs) AS finished,
              (SELECT count(DISTINCT id)::int FROM "${lh.schema}".finished_jobs) AS distinct_finished`,
    );
    expect(rows[0]).toEqual({ live: 0, finished: total, distinct_finished: total });
  });

  it('a lane holding a locked row, or locked by a long reader, is not truncated; the rotation does not wait for it', async () => {
    const lh = await migratedClient();
    const { id } = await lh.enqueue('lanes-held', { n: 1 });
    const due = await dueLane(pool);
    await putInLane(pool, lh.schema, [id], due);

    const holder = await pool.connect();
    try {
      // A row locked by a transaction in flight is skipped: neither moved nor truncated away.
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM "${lh.schema}".jobs WHERE id = $1 FOR UPDATE`, [id]);
      const held = await lh.rotateLanes();
      expect(held.moved).toBe(0);
      expect(held.truncated).not.toContain(`jobs_lane_${due}`);
      await holder.query('COMMIT');
      expect((await lanesOf(pool, lh.schema, [id]))[id]).toBe(due);

      // The row moves; the now empty lane is truncated unless a reader of jobs holds it.
      const [lease] = await lh.claim({ queue: 'lanes-held', owner: 'held' });
      if (!lease) throw new Error('no lease');
      await lh.completeMany([lease]);
      await putInLane(pool, lh.schema, [(await lh.enqueue('lanes-held', { n: 2 })).id], due);
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query(`SELECT count(*) FROM "${lh.schema}".jobs`);
      const blocked = await lh.rotateLanes();
      expect(blocked.moved).toBe(1);
      expect(blocked.truncated).not.toContain(`jobs_lane_${due}`);
      expect(await laneSize(pool, lh.schema, due)).toBeGreaterThan(0);
      // Meanwhile enqueues and claims go on.
      await lh.enqueue('lanes-held', { n: 3 });
      await holder.query('COMMIT');
      expect((await lh.rotateLanes()).truncated).toContain(`jobs_lane_${due}`);
      expect(await laneSize(pool, lh.schema, due)).toBe(0);
    } finally {
      holder.release();
    }
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".jobs`);
    expect(rows[0].n).toBe(2);
  });

  it('a finished_jobs lane is truncated once retention pruned every record in it, never before', async () => {
    const lh = await migratedClient({ succeededRetentionMs: 0 });
    await lh.enqueueMany(
      'lanes-finished',
      Array.from({ length: 20 }, (_, i) => ({ payload: { i } })),
    );
    const leases = await lh.claim({ queue: 'lanes-finished', owner: 'f', limit: 20 });
    expect((await lh.completeMany(leases)).size).toBe(20);
    const due = await dueLane(pool);
    await pool.query(`UPDATE "${lh.schema}".finished_jobs SET lane = $1`, [due]);
    await pool.query(`DELETE FROM "${lh.schema}".jobs_lane_${due}`); // nothing of jobs in the way
    const finishedLane = `finished_jobs_lane_${due}`;
    const size = async () =>
      Number(
        (await pool.query(`SELECT pg_relation_size($1::regclass) AS n`, [`"${lh.schema}".${finishedLane}`]))
          .rows[0].n,
      );
    // Records not yet pruned keep their lane: it is neither truncated nor emptied.
    expect((await lh.rotateLanes()).truncated).not.toContain(finishedLane);
    expect(await size()).toBeGreaterThan(0);
    const kept = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".finished_jobs`);
    expect(kept.rows[0].n).toBe(20);
    // Retention prunes them (deletes leave dead versions); then the lane is truncated.
    await lh.prune();
    const left = await pool.query(`SELECT count(*)::int AS n FROM "${lh.schema}".finished_jobs`);
    expect(left.rows[0].n).toBe(0);
    expect(await size()).toBeGreaterThan(0);
    expect((await lh.rotateLanes()).truncated).toContain(finishedLane);
    expect(await size()).toBe(0);
  });

  it('a claim and a completion write each job in the lane holding it, not in every lane', async () => {
    // Three pending jobs in each of the four lanes: the claim takes all twelve and the completion
    // ends them, each statement explained as it runs. Routed by lane, each write on jobs targets
    // one lane (pruned when planned) and changes that lane's three rows; a write by id over the
    // parent would target all four lanes and probe each for every id.
    const lh = await migratedClient();
    const { ids } = await lh.enqueueMany(
      'routed',
      Array.from({ length: 12 }, (_, n) => ({ payload: n })),
    );
    for (const lane of [0, 1, 2, 3])
      await putInLane(pool, lh.schema, ids.slice(lane * 3, lane * 3 + 3), lane);
    const explain = async (text: string, params: unknown[]): Promise<PlanNode[]> => {
      const { rows } = await pool.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params);
      return planNodes(rows[0]['QUERY PLAN'][0].Plan);
    };
    const writesOnJobs = (nodes: PlanNode[], operation: string) =>
      nodes
        .filter((node) => node.Operation === operation && node['Relation Name'] === 'jobs')
        .map((node) => ({
          lanes: (node['Target Tables'] ?? []).map((t) => t['Relation Name']),
          rows: node['Actual Rows'],
        }))
        .sort((a, b) => a.lanes.join().localeCompare(b.lanes.join()));
    const perLane = [0, 1, 2, 3].map((lane) => ({ lanes: [`jobs_lane_${lane}`], rows: 3 }));

    const claim = await explain(JobClaimMany(lh.schema).text, [
      'routed',
      'router',
      12,
      60_000,
      newClaimId(),
      '-infinity',
    ]);
    expect(writesOnJobs(claim, 'Update')).toEqual(perLane);
    const { rows: leases } = await pool.query<{ id: string; token: string; claim_id: string }>(
      `SELECT id::text, lease_token::text AS token, lease_claim_id::text AS claim_id
       FROM "${lh.schema}".jobs AS j WHERE status = 'running' ORDER BY j.id`,
    );
    expect(leases.map((l) => l.id)).toEqual(ids);
    // Every lane kept its jobs: a claim changes no lane.
    expect(Object.values(await lanesOf(pool, lh.schema, ids))).toEqual([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);

    const refs = leases.map((l) => ({
      jobId: l.id,
      token: l.token,
      claimId: l.claim_id,
      owner: 'router',
      queue: 'routed',
    }));
    const complete = await explain(JobCompleteMany(lh.schema).text, [
      ...fenceArrays(refs),
      wakeupChannel(lh.schema),
      finishedChannel(lh.schema),
      'routed', // the batch's one queue
    ]);
    expect(writesOnJobs(complete, 'Delete')).toEqual(perLane);
    const finished = await pool.query(
      `SELECT count(*)::int AS n FROM "${lh.schema}".finished_jobs WHERE id = ANY ($1::bigint[])`,
      [ids],
    );
    expect(finished.rows[0].n).toBe(12);
    expect(await lanesOf(pool, lh.schema, ids)).toEqual({});
  });

  it('the worker role may rotate lanes (the functions are its own, with a pinned search_path) and the producer may not', async () => {
    const lh = await migratedClient();
    const can = async (kind: 'producer' | 'worker' | 'admin', fn: string) => {
      const { rows } = await pool.query('SELECT has_function_privilege($1, $2, $3) AS ok', [
        schemaRole(lh.schema, kind),
        `"${lh.schema}".${fn}`,
        'EXECUTE',
      ]);
      return rows[0].ok as boolean;
    };
    for (const fn of ['move_job_lane_rows(integer)', 'truncate_job_lanes()']) {
      expect(await can('worker', fn)).toBe(true);
      expect(await can('admin', fn)).toBe(true);
      expect(await can('producer', fn)).toBe(false);
      // They run as the owner: their search_path is pinned, with pg_temp last.
      const { rows } = await pool.query(
        `SELECT array_to_string(proconfig, ';') AS config FROM pg_proc WHERE oid = $1::regprocedure`,
        [`"${lh.schema}".${fn}`],
      );
      expect(rows[0].config).toContain(`search_path=pg_catalog, ${lh.schema}, pg_temp`);
    }
  });
});
