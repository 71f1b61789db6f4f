import { describe, expect, it } from 'vitest';
import { beginEffect, recordEffectResult } from '../../src/storage/flows/effects.js';
import { expireLease, migratedClient, testPool } from '../support/db.js';

// The effects ledger's storage contract, below the runtime that reads it: an intent is recorded
// once per job and name, by the first attempt that asks; a later ask reports what is there and
// rewrites nothing (the intent keeps the attempt and claim that made it).
describe('the effects ledger', () => {
  it('records an intent once: a second begin reports it as uncertain and leaves it as it was', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool(2);
    const { id } = await lh.enqueue('ledger', {});
    const [first] = await lh.claim({ queue: 'ledger', owner: 'w1' });
    expect(await beginEffect(lh.pool, lh.schema, first!, 'charge', 'k')).toMatchObject({
      held: true,
      recorded: true,
      uncertain: false,
      hasResult: false,
    });
    // The first attempt dies before recording a result; the job is reclaimed.
    await expireLease(pool, lh.schema, id);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    const [second] = await lh.claim({ queue: 'ledger', owner: 'w2' });
    expect(second?.attempt).toBe(2);
    expect(await beginEffect(lh.pool, lh.schema, second!, 'charge', 'k')).toMatchObject({
      held: true,
      recorded: false,
      uncertain: true,
    });
    const { rows } = await pool.query(
      `SELECT attempt, lease_token::text FROM "${lh.schema}".job_effects WHERE job_id = $1 AND name = 'charge'`,
      [id],
    );
    expect(rows).toEqual([{ attempt: 1, lease_token: first!.token }]);
    // A result recorded under the current lease is what every later begin returns.
    expect(await recordEffectResult(lh.pool, lh.schema, second!, 'charge', '{"ok":true}')).toBe(true);
    expect(await beginEffect(lh.pool, lh.schema, second!, 'charge', 'k')).toMatchObject({
      held: true,
      recorded: false,
      hasResult: true,
      result: { ok: true },
    });
  });

  it('refuses to record a result under a lease that is no longer current', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const pool = testPool(2);
    const { id } = await lh.enqueue('ledger', {});
    const [first] = await lh.claim({ queue: 'ledger', owner: 'w1' });
    expect((await beginEffect(lh.pool, lh.schema, first!, 'charge', 'k')).recorded).toBe(true);
    await expireLease(pool, lh.schema, id);
    await lh.recoverExpired();
    await lh.claim({ queue: 'ledger', owner: 'w2' });
    expect(await recordEffectResult(lh.pool, lh.schema, first!, 'charge', '{"stale":true}')).toBe(false);
    const { rows } = await pool.query(
      `SELECT result FROM "${lh.schema}".job_effects WHERE job_id = $1 AND name = 'charge'`,
      [id],
    );
    expect(rows).toEqual([{ result: null }]);
  });
});
