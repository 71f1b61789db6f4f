import { describe, expect, it } from 'vitest';
import { isLeaseholdError, Leasehold, SchemaVersionError } from '../../src/index.js';
import { loadMigrations } from '../../src/migrations/migrator.js';
import { databaseUrl, dropSchema, testPool, uniqueSchema } from '../support/db.js';

describe('migrations', () => {
  it('many processes migrating at once apply each migration exactly once', async () => {
    // Several rounds: behind PgBouncer, a migrator that waited for the lock collided with the
    // winner's CREATE SCHEMA in most rounds until such collisions were retried.
    for (let round = 0; round < 5; round++) {
      const schema = uniqueSchema('lh_migrate');
      const clients = Array.from(
        { length: 6 },
        () => new Leasehold({ connectionString: databaseUrl(), schema, poolSize: 1 }),
      );
      try {
        const results = await Promise.all(clients.map((lh) => lh.migrate()));
        const latest = loadMigrations().at(-1)!.version;
        expect(results.filter((r) => r.applied.length > 0)).toHaveLength(1);
        expect(results.every((r) => r.version === latest)).toBe(true);
        const pool = testPool(1);
        const { rows } = await pool.query(`SELECT version FROM "${schema}".migrations ORDER BY version`);
        expect(rows.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
        // Running it again is a no-op.
        expect((await clients[0]!.migrate()).applied).toEqual([]);
      } finally {
        await Promise.all(clients.map((lh) => lh.close()));
        await dropSchema(schema);
      }
    }
  });

  it('refuses to run against a schema migrated by a newer Leasehold', async () => {
    const schema = uniqueSchema('lh_newer');
    const lh = new Leasehold({ connectionString: databaseUrl(), schema });
    try {
      await lh.migrate();
      const pool = testPool(1);
      await pool.query(`INSERT INTO "${schema}".migrations (version, name) VALUES (999, 'from_the_future')`);
      const err = await lh.migrate().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SchemaVersionError);
      expect(isLeaseholdError(err, 'SCHEMA_VERSION')).toBe(true);
      expect((err as Error).message).toMatch(/version 999, newer than this Leasehold/);
    } finally {
      await lh.close();
      await dropSchema(schema);
    }
  });

  it('keeps two schemas on one server apart', async () => {
    const a = new Leasehold({ connectionString: databaseUrl(), schema: uniqueSchema('lh_a') });
    const b = new Leasehold({ connectionString: databaseUrl(), schema: uniqueSchema('lh_b') });
    try {
      await a.migrate();
      await b.migrate();
      await a.enqueue('shared-name', { from: 'a' });
      expect(await b.claim({ queue: 'shared-name', owner: 'w' })).toEqual([]);
      const [lease] = await a.claim({ queue: 'shared-name', owner: 'w' });
      expect(lease?.payload).toEqual({ from: 'a' });
    } finally {
      await a.close();
      await b.close();
      await dropSchema(a.schema);
      await dropSchema(b.schema);
    }
  });
});
