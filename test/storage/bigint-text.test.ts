import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { migratedClient } from '../support/db.js';

// Leasehold's own pool reads bigint (int8) columns as the text node-postgres would return, without
// its default parser's per-value regular expression; an app that set its own int8 parser keeps it.
describe('bigint columns on the Leasehold pool', () => {
  it('come back as the same decimal strings node-postgres returns, negative ones too', async () => {
    const lh = await migratedClient();
    const { rows } = await lh.pool.query<{ a: string; b: string }>(
      'SELECT 9223372036854775807::int8 AS a, (-42)::int8 AS b',
    );
    expect(rows[0]).toEqual({ a: '9223372036854775807', b: '-42' });
  });

  it("keep an app's own int8 parser (pg.types.setTypeParser) for the app's queries on lh.pool", async () => {
    const lh = await migratedClient();
    const original = pg.types.getTypeParser(20, 'text');
    pg.types.setTypeParser(20, (value: string) => BigInt(value));
    try {
      const { rows } = await lh.pool.query<{ v: bigint }>('SELECT 7::int8 AS v');
      expect(rows[0]?.v).toBe(7n);
    } finally {
      pg.types.setTypeParser(20, original);
    }
  });
});
