import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DatabaseError, isLeaseholdError, Leasehold, startEmbeddedPostgres } from '../src/index.js';

describe('embedded PostgreSQL', () => {
  it('starts a real server, leaves the process signal handlers alone, and removes everything on stop', async () => {
    const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'beforeExit', 'message'] as const;
    const before = events.map((event) => process.listenerCount(event));
    const server = await startEmbeddedPostgres();
    try {
      // The package would otherwise exit the process on SIGTERM, cutting a graceful stop short.
      expect(events.map((event) => process.listenerCount(event))).toEqual(before);
      const client = new pg.Client({ connectionString: server.connectionString });
      await client.connect();
      const { rows } = await client.query<{ version: string }>('SELECT version()');
      await client.end();
      expect(rows[0]?.version).toMatch(/^PostgreSQL/);
    } finally {
      await server.stop();
    }
    const refused = await new pg.Client({
      connectionString: server.connectionString,
      connectionTimeoutMillis: 2000,
    })
      .connect()
      .then(
        () => false,
        () => true,
      );
    expect(refused).toBe(true);
  });

  it('migrate() against an unreachable server rejects with a DatabaseError', async () => {
    const lh = new Leasehold({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' });
    try {
      const err = await lh.migrate().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DatabaseError);
      expect(isLeaseholdError(err, 'DATABASE')).toBe(true);
    } finally {
      await lh.close();
    }
  });
});
