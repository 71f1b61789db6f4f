import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseError, Leasehold } from '../../src/index.js';
import { directDatabaseUrl, dropSchema, uniqueSchema, waitFor } from '../support/db.js';
import { type RestartablePostgres, startRestartablePostgres } from '../support/restartable-postgres.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { started } from '../support/worker.js';

/**
 * Two servers and no standby: the tests' own server (the writable one, "the new primary") and a
 * throwaway one this file starts, which it makes read-only or crashes as a demoted or failed
 * primary would be. The client lists the throwaway server first, as a connection string lists the
 * old primary before its standby.
 */
let other: RestartablePostgres;
let otherPort: number;
const main = new URL(directDatabaseUrl());
const mainPort = Number(main.port || 5432);
const clients: Leasehold[] = [];
const schemas: string[] = [];

beforeAll(async () => {
  other = await startRestartablePostgres();
  otherPort = Number(new URL(other.connectionString).port);
});

afterAll(async () => {
  for (const lh of clients.splice(0)) await lh.close();
  for (const schema of schemas.splice(0)) await dropSchema(schema);
});

async function onServer<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

// A server turned read-only while running, as a demoted primary is: existing sessions too.
async function setReadOnly(url: string, on: boolean): Promise<void> {
  await onServer(url, async (client) => {
    await client.query(
      on
        ? 'ALTER SYSTEM SET default_transaction_read_only = on'
        : 'ALTER SYSTEM RESET default_transaction_read_only',
    );
    await client.query('SELECT pg_reload_conf()');
  });
  // The reload reaches every backend asynchronously: wait until a new session sees it.
  await waitFor(
    () =>
      onServer(url, async (client) => {
        const { rows } = await client.query<{ ro: string }>(
          "SELECT current_setting('default_transaction_read_only') AS ro",
        );
        return rows[0]?.ro === (on ? 'on' : 'off');
      }),
    { what: 'the reload' },
  );
}

// The libpq form: user and password from the main server's URL, both hosts in the authority.
function multiHostUrl(first: number, second: number): string {
  const auth = main.username ? `${main.username}${main.password ? `:${main.password}` : ''}@` : '';
  return `postgres://${auth}127.0.0.1:${first},127.0.0.1:${second}${main.pathname}?target_session_attrs=read-write`;
}

function client(options: ConstructorParameters<typeof Leasehold>[0]): Leasehold {
  const schema = uniqueSchema('lh_failover');
  schemas.push(schema);
  // Direct connections to both servers, even in the test pass behind PgBouncer (which sets
  // LEASEHOLD_POOLER=transaction for every client): host lists are for direct connections.
  const lh = new Leasehold({ schema, preparedStatements: true, listen: true, ...options });
  clients.push(lh);
  return lh;
}

async function serverPort(lh: Leasehold): Promise<number> {
  const { rows } = await lh.pool.query<{ port: number }>('SELECT inet_server_port() AS port');
  return rows[0]?.port as number;
}

async function listenerPort(lh: Leasehold, pid: number | null): Promise<number | null> {
  if (pid === null) return null;
  for (const [url, port] of [
    [directDatabaseUrl(), mainPort],
    [other.connectionString, otherPort],
  ] as const) {
    const found = await onServer(url, async (c) => {
      const { rows } = await c.query(
        `SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND application_name = 'leasehold-listener'`,
        [pid],
      );
      return rows.length > 0;
    }).catch(() => false);
    if (found) return port;
  }
  void lh;
  return null;
}

describe('a host list with target_session_attrs=read-write', () => {
  it('a multi-host URL listing a read-only server first migrates, works and listens on the writable one', async () => {
    await setReadOnly(other.connectionString, true);
    try {
      const lh = client({ connectionString: multiHostUrl(otherPort, mainPort) });
      const result = await lh.migrate();
      expect(result.applied.length).toBeGreaterThan(0);
      expect(await serverPort(lh)).toBe(mainPort);
      const done: string[] = [];
      const worker = await started(
        lh.worker({ queues: { hosts: async (job) => void done.push(job.id) }, pollIntervalMs: 60_000 }),
      );
      await waitFor(() => worker.listenerPid, { what: 'the listener' });
      expect(await listenerPort(lh, worker.listenerPid)).toBe(mainPort);
      // Woken by the listener (the poll is a minute away), so it listens where the job went.
      const { id } = await lh.enqueue('hosts', {});
      await waitFor(() => done.includes(id), { what: 'the job' });
    } finally {
      await setReadOnly(other.connectionString, false);
    }
  });

  it('a first host that answers nothing (black-holed) costs no connect timeout with read-write', async () => {
    const hole = await startTcpProxy(other.connectionString);
    hole.blackHole();
    const holePort = Number(new URL(hole.connectionString).port);
    const lh = client({
      connectionString: directDatabaseUrl(),
      hosts: [
        { host: '127.0.0.1', port: holePort },
        { host: '127.0.0.1', port: mainPort },
      ],
      targetSessionAttrs: 'read-write',
      connectTimeoutMs: 20_000,
    });
    const startedAt = performance.now();
    await lh.migrate();
    expect(await serverPort(lh)).toBe(mainPort);
    // Far below the 20 s the first host's connect attempt is allowed (it waits 1 s for the first host).
    expect(performance.now() - startedAt).toBeLessThan(10_000);
  });

  it('moves the pool and the listener to the other server when the one in use turns read-only mid-run', async () => {
    const lh = client({
      connectionString: directDatabaseUrl(),
      hosts: [
        { host: '127.0.0.1', port: otherPort },
        { host: '127.0.0.1', port: mainPort },
      ],
      targetSessionAttrs: 'read-write',
    });
    await lh.migrate(); // on the first server, writable for now
    expect(await serverPort(lh)).toBe(otherPort);
    // The same schema on the server it will move to (a standby would have it by replication).
    const twin = new Leasehold({ connectionString: directDatabaseUrl(), schema: lh.schema });
    clients.push(twin);
    await twin.migrate();

    const done = new Map<string, number>();
    const errors: unknown[] = [];
    const worker = lh.worker({
      queues: { moves: async (job) => void done.set(job.id, performance.now()) },
      pollIntervalMs: 200,
    });
    worker.on('error', (err) => errors.push(err));
    await started(worker);
    const before = await lh.enqueue('moves', {});
    await waitFor(() => done.has(before.id), { what: 'the job on the first server' });
    await waitFor(() => worker.listenerPid, { what: 'the listener' });
    expect(await listenerPort(lh, worker.listenerPid)).toBe(otherPort);

    // Demoted: the first server now refuses every write (SQLSTATE 25006).
    await setReadOnly(other.connectionString, true);
    try {
      const demotedAt = performance.now();
      const after = await twin.enqueue('moves', {});
      await waitFor(async () => (await twin.getJob(after.id))?.status === 'succeeded', {
        what: 'the job completed on the second server',
        intervalMs: 5,
      });
      const firstCompletionMs = performance.now() - demotedAt;
      // Measured (see docs/operations.md); the bound leaves room for a loaded machine.
      expect(firstCompletionMs).toBeLessThan(5_000);
      // Idle connections to the demoted server are dropped as they are used and released.
      await waitFor(async () => (await serverPort(lh)) === mainPort, {
        what: 'the pool on the second server',
      });
      await waitFor(async () => (await listenerPort(lh, worker.listenerPid)) === mainPort, {
        what: 'the listener on the second server',
      });
      expect(
        errors.some((err) => /read-only|25006/.test(`${err} ${(err as { cause?: unknown }).cause}`)),
      ).toBe(true);
      // The refusals tell of the demotion; the listener following the pool is no event of its own
      // (it was one more, a raw Error, for the same demotion).
      expect(
        errors.filter((err) => !(err instanceof DatabaseError && err.sqlState === '25006')).map(String),
      ).toEqual([]);
      console.log(
        `read-only switch to first completion on the other server: ${Math.round(firstCompletionMs)} ms`,
      );
    } finally {
      await worker.stop();
      await setReadOnly(other.connectionString, false);
    }
  });

  it('sends an enqueue with an idempotency key again when its server is demoted under it, and surfaces one without a key', async () => {
    const lh = client({
      connectionString: directDatabaseUrl(),
      hosts: [
        { host: '127.0.0.1', port: otherPort },
        { host: '127.0.0.1', port: mainPort },
      ],
      targetSessionAttrs: 'read-write',
      poolSize: 2,
      listen: false,
    });
    await lh.migrate(); // on the first server, writable for now
    const twin = new Leasehold({ connectionString: directDatabaseUrl(), schema: lh.schema });
    clients.push(twin);
    await twin.migrate();
    // Both pooled connections open on the first server, and idle: the demotion reaches them there.
    const ports = await Promise.all(
      [0, 1].map(() => lh.pool.query<{ port: number }>('SELECT inet_server_port() AS port, pg_sleep(0.05)')),
    );
    expect(ports.map((r) => r.rows[0]?.port)).toEqual([otherPort, otherPort]);
    await setReadOnly(other.connectionString, true);
    try {
      // Without a key, a lost or refused enqueue is the caller's to see: it may not be sent again.
      const plain = await lh.enqueue('orders', { n: 1 }).catch((err: unknown) => err);
      expect(plain).toBeInstanceOf(DatabaseError);
      expect((plain as DatabaseError).sqlState).toBe('25006');
      // With a key, the second pooled connection's refusal is followed by a new attempt, which the
      // host list sends to the writable server: one job, created there.
      const keyed = await lh.enqueue('orders', { n: 2 }, { idempotencyKey: 'order-2' });
      expect(keyed.created).toBe(true);
      expect(await twin.getJob(keyed.id)).toMatchObject({ queueName: 'orders', status: 'pending' });
      expect(await serverPort(lh)).toBe(mainPort);
      // Sent again by its producer, the same key finds the same job.
      expect(await lh.enqueue('orders', { n: 2 }, { idempotencyKey: 'order-2' })).toEqual({
        id: keyed.id,
        created: false,
      });
    } finally {
      await setReadOnly(other.connectionString, false);
    }
  });

  it('moves to the other server when the one in use crashes, and the listener follows', async () => {
    const lh = client({ connectionString: multiHostUrl(otherPort, mainPort) });
    await lh.migrate();
    expect(await serverPort(lh)).toBe(otherPort);
    const twin = new Leasehold({ connectionString: directDatabaseUrl(), schema: lh.schema });
    clients.push(twin);
    await twin.migrate();
    const done = new Map<string, number>();
    const worker = lh.worker({
      queues: { crash: async (job) => void done.set(job.id, performance.now()) },
      pollIntervalMs: 60_000,
    });
    worker.on('error', () => {});
    await started(worker);
    await waitFor(() => worker.listenerPid, { what: 'the listener' });
    try {
      // Waiting on the surviving server, unseen by a worker that is still on the other one.
      const { id } = await twin.enqueue('crash', {});
      await other.crash();
      const crashedAt = performance.now();
      // Only the listener's return wakes the queue (the poll is a minute away), on the other server.
      await waitFor(async () => (await twin.getJob(id))?.status === 'succeeded', {
        what: 'the job completed on the surviving server',
        intervalMs: 5,
      });
      const firstCompletionMs = performance.now() - crashedAt;
      expect(firstCompletionMs).toBeLessThan(5_000);
      // Asked as the read-only case asks: a lookup is a new connection to each server, which a
      // loaded server (CI's system pass runs two files at once on it) may answer late or refuse.
      await waitFor(async () => (await listenerPort(lh, worker.listenerPid)) === mainPort, {
        what: 'the listener on the surviving server',
      });
      await waitFor(async () => (await serverPort(lh).catch(() => 0)) === mainPort, {
        what: 'the pool on the surviving server',
      });
      console.log(`crash to first completion on the other server: ${Math.round(firstCompletionMs)} ms`);
    } finally {
      await worker.stop();
      await other.start();
    }
  });
});
