import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  DatabaseError,
  EmbeddedPostgresError,
  isLeaseholdError,
  Leasehold,
  startEmbeddedPostgres,
} from '../../src/index.js';

describe('embedded PostgreSQL', () => {
  it('starts a real server, leaves the process signal handlers alone, and removes everything on stop', async () => {
    const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'beforeExit', 'message'] as const;
    const before = events.map((event) => process.listenerCount(event));
    const exitListeners = process.listenerCount('exit');
    const server = await startEmbeddedPostgres();
    try {
      // The package would otherwise exit the process on SIGTERM, cutting a graceful stop short.
      expect(events.map((event) => process.listenerCount(event))).toEqual(before);
      expect(process.listenerCount('exit')).toBe(exitListeners + 1); // ours, to stop an orphaned server
      const client = new pg.Client({ connectionString: server.connectionString });
      await client.connect();
      const { rows } = await client.query<{ version: string }>('SELECT version()');
      await client.end();
      expect(rows[0]?.version).toMatch(/^PostgreSQL/);
    } finally {
      await server.stop();
    }
    expect(process.listenerCount('exit')).toBe(exitListeners);
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

  it('a script that starts and stops one exits with its own exit code', async () => {
    const dir = fileURLToPath(new URL('../../.tmp/embedded-exit/', import.meta.url));
    mkdirSync(dir, { recursive: true });
    const script = `${dir}/script.mjs`;
    writeFileSync(
      script,
      "import { startEmbeddedPostgres } from 'leasehold';\n" +
        'const server = await startEmbeddedPostgres();\n' +
        'await server.stop();\n' +
        'process.exitCode = 3;\n',
    );
    const code = await new Promise<number | null>((resolve) => {
      execFile(process.execPath, [script], { timeout: 60_000 }, (err) =>
        resolve(err ? (err.code as number) : 0),
      );
    });
    expect(code).toBe(3);
  });

  it('a server that cannot start rejects at once with an EmbeddedPostgresError saying why, not an unhandled event', async () => {
    const bad = await startEmbeddedPostgres({ settings: { shared_buffers: 'lots' } }).catch(
      (e: unknown) => e,
    );
    expect(bad).toBeInstanceOf(EmbeddedPostgresError);
    expect(isLeaseholdError(bad, 'EMBEDDED_POSTGRES')).toBe(true);
    expect((bad as Error).message).toMatch(
      /exited while starting.*invalid value for parameter "shared_buffers"/,
    );
    expect((bad as Error).message).not.toContain('\n');
    // A port already taken by another server.
    const first = await startEmbeddedPostgres();
    try {
      const taken = await startEmbeddedPostgres({ port: first.port }).catch((e: unknown) => e);
      expect(isLeaseholdError(taken, 'EMBEDDED_POSTGRES')).toBe(true);
      expect((taken as Error).message).toMatch(new RegExp(`If the port \\(${first.port}\\) is taken`));
    } finally {
      await first.stop();
    }
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
