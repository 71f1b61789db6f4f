import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { migratedClient, testPool } from '../support/db.js';

// `skipped` used to mean both "a worker handed back a job it never started" and "an operator
// skipped a dead head of an ordering key". The operator's event is now `key_skipped` (migration
// 009), and history reads an old row of that meaning as `key_skipped` too.

const MIGRATION_009 = readFileSync(
  new URL('../../src/migrations/sql/001-010/009_event_kinds.sql', import.meta.url),
  'utf8',
);

async function deadOrderedJob(lh: Awaited<ReturnType<typeof migratedClient>>, queue: string) {
  const { id } = await lh.enqueue(queue, {}, { orderingKey: 'k', maxAttempts: 1 });
  const [lease] = await lh.claim({ queue, owner: 'w' });
  expect(await lh.fail(lease!, new Error('boom'))).toBe('dead');
  return id;
}

describe('distinct event kinds', () => {
  it('an operator skip is recorded as key_skipped (a worker hand-back stays skipped: history.test.ts)', async () => {
    const lh = await migratedClient();
    const id = await deadOrderedJob(lh, 'kinds');
    await lh.skip(id, { reason: 'bad data', actor: 'ops' });
    const skippedJob = await lh.getJob(id, { history: true });
    expect(skippedJob!.history.at(-1)).toMatchObject({ kind: 'key_skipped', statusAfter: 'cancelled' });
  });

  it('migration 009 renames old operator-skip rows, leaves hand-backs alone, and readers accept both spellings', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const id = await deadOrderedJob(lh, 'old-rows');
    await lh.skip(id, { reason: 'given up', actor: 'ops' });
    // Write the rows as an older Leasehold did: the operator's skip as `skipped`, beside a hand-back.
    await pool.query(
      `UPDATE "${lh.schema}".job_events SET kind = 'skipped' WHERE job_id = $1 AND kind = 'key_skipped'`,
      [id],
    );
    await pool.query(
      `INSERT INTO "${lh.schema}".job_events (job_id, queue_name, kind, status_after, reason)
       VALUES ($1, 'old-rows', 'skipped', 'pending', 'unstarted')`,
      [id],
    );
    // Before the rename, history already reads the old operator row as key_skipped.
    const before = await lh.getJob(id, { history: true });
    expect(before!.history.filter((e) => e.kind === 'key_skipped')).toHaveLength(1);

    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL search_path TO "${lh.schema}"`);
      await client.query(MIGRATION_009);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const { rows } = await pool.query<{ kind: string; status_after: string }>(
      `SELECT kind, status_after FROM "${lh.schema}".job_events
       WHERE job_id = $1 AND kind IN ('skipped', 'key_skipped') ORDER BY id`,
      [id],
    );
    expect(rows).toEqual([
      { kind: 'key_skipped', status_after: 'cancelled' },
      { kind: 'skipped', status_after: 'pending' },
    ]);
    const after = await lh.getJob(id, { history: true });
    expect(after!.history.map((e) => e.kind).filter((k) => k.includes('skipped'))).toEqual([
      'key_skipped',
      'skipped',
    ]);
  });
});
