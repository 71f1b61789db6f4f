import { describe, expect, it } from 'vitest';
import { AgingService } from '../../src/maintenance/aging.js';
import { migratedClient, testPool } from '../support/db.js';

describe('ordering key repair', () => {
  it('a key whose head became a cancelled job (the process died before its follow-up repair) is handed on by the maintenance pass', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    const s = `"${lh.schema}"`;
    const { ids } = await lh.enqueueMany('ledger', [
      { payload: 'a', orderingKey: 'acct-1' },
      { payload: 'b', orderingKey: 'acct-1' },
      { payload: 'c', orderingKey: 'acct-1' },
    ]);
    const [a, b, c] = ids as [string, string, string];
    const [lease] = await lh.claim({ queue: 'ledger', owner: 'w' });
    expect(lease?.jobId).toBe(a);
    // The state a crash leaves behind: A's completion handed the key to B, B had just been
    // cancelled, and the process died before the repair statement that would have moved on to C.
    await pool.query(`DELETE FROM ${s}.jobs WHERE id = $1`, [a]);
    await pool.query(
      `UPDATE ${s}.jobs SET status = 'cancelled', awaits_predecessor = false, finished_at = now() WHERE id = $1`,
      [b],
    );
    await pool.query(
      `UPDATE ${s}.ordering_keys SET head_id = $1, waiting = 1 WHERE queue_name = 'ledger' AND ordering_key = 'acct-1'`,
      [b],
    );
    expect(await lh.claim({ queue: 'ledger', owner: 'w' })).toEqual([]);

    const maintenance = new AgingService({ intervalMs: 1000, db: lh.pool, schema: lh.schema });
    const result = await maintenance.runOnce();
    expect(result.keysReleased).toBe(1);
    const [next] = await lh.claim({ queue: 'ledger', owner: 'w' });
    expect(next?.jobId).toBe(c);
  });
});
