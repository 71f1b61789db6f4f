import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type DatabaseError, isLeaseholdError, Leasehold } from '../../src/index.js';
import { root } from '../support/cli-build.js';
import {
  closeAfterTest,
  databaseUrl,
  dropSchema,
  migratedClient,
  testPool,
  uniqueSchema,
  waitFor,
} from '../support/db.js';
import { assertFreshDist } from '../support/fresh-dist.js';
import { rejection } from '../support/rejection.js';
import { createLogin } from '../support/roles.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { started } from '../support/worker.js';

/** A loopback port nothing listens on: connections to it are refused at once. */
async function refusedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function refusedUrl(): Promise<string> {
  const url = new URL(databaseUrl());
  url.hostname = '127.0.0.1';
  url.port = String(await refusedPort());
  return url.toString();
}

/** Process warnings emitted while a test runs: captured (and so not printed), with their codes. */
function captureWarnings(): { message: string; code: string | undefined }[] {
  const seen: { message: string; code: string | undefined }[] = [];
  vi.spyOn(process, 'emitWarning').mockImplementation(((warning: string | Error, options?: unknown) => {
    const code =
      typeof options === 'object' && options !== null ? (options as { code?: string }).code : undefined;
    seen.push({ message: String(warning), code });
  }) as typeof process.emitWarning);
  return seen;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('start fails loudly', () => {
  it('start() against a refused port rejects with DATABASE (errno, no SQLSTATE, no statement name) and starts nothing', async () => {
    const lh = closeAfterTest(
      new Leasehold({ connectionString: await refusedUrl(), schema: uniqueSchema() }),
    );
    const worker = lh.worker({ queues: { q: { handler: async () => {} } } });
    const events: string[] = [];
    worker.on('started', () => events.push('started'));
    worker.on('error', () => events.push('error'));
    const err = await rejection(worker.start());
    expect(isLeaseholdError(err, 'DATABASE')).toBe(true);
    const dbErr = err as DatabaseError;
    expect(dbErr.message).toMatch(/^start failed: /);
    expect(dbErr.message).not.toMatch(/leasehold_/);
    expect(dbErr.sqlState).toBeUndefined();
    expect(dbErr.errno).toBe('ECONNREFUSED');
    expect(events).toEqual([]);
    // Nothing runs: stop() has nothing to wait for, and the worker may start again later.
    await worker.stop();
    expect(worker.activeCount).toBe(0);
  });

  it('a process whose worker cannot reach its database gets DATABASE from start() and exits by itself', async () => {
    assertFreshDist();
    // The built package, as a user runs it: no close(), no process.exit(); nothing may be left running.
    const script = `
      import { Leasehold } from ${JSON.stringify(pathToFileURL(`${root}dist/index.js`).href)};
      const lh = new Leasehold({ connectionString: process.env.REFUSED_URL });
      const worker = lh.worker({ queues: { emails: async () => {} } });
      try {
        await worker.start();
        console.log('started');
      } catch (err) {
        console.log(JSON.stringify({ code: err.code, errno: err.errno, sqlState: err.sqlState ?? null }));
      }
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, REFUSED_URL: await refusedUrl() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const deadline = setTimeout(() => child.kill('SIGKILL'), 20_000);
    try {
      const code = await exited;
      expect(code, `the process did not exit by itself; it printed:\n${output}`).toBe(0);
      expect(JSON.parse(output.trim()), output).toEqual({
        code: 'DATABASE',
        errno: 'ECONNREFUSED',
        sqlState: null,
      });
    } finally {
      clearTimeout(deadline);
      child.kill('SIGKILL');
    }
  });

  it('start() on a schema never migrated rejects with SCHEMA_VERSION saying to migrate', async () => {
    const schema = uniqueSchema('lh_unmigrated');
    const lh = closeAfterTest(new Leasehold({ connectionString: databaseUrl(), schema }));
    const worker = lh.worker({ queues: { q: { handler: async () => {} } } });
    const err = await rejection(worker.start());
    expect(isLeaseholdError(err, 'SCHEMA_VERSION')).toBe(true);
    expect((err as Error).message).toMatch(new RegExp(`schema ${schema} is not migrated.*migrate`));
    // The worker did not start: a second start() is refused the same way, not as already started.
    expect(isLeaseholdError(await rejection(worker.start()), 'SCHEMA_VERSION')).toBe(true);
  });

  it('start() on a schema newer than the code rejects with SCHEMA_VERSION', async () => {
    const schema = uniqueSchema('lh_newer');
    const lh = closeAfterTest(new Leasehold({ connectionString: databaseUrl(), schema }));
    try {
      await lh.migrate();
      const pool = testPool(1);
      await pool.query(`INSERT INTO "${schema}".migrations (version, name) VALUES (999, 'future')`);
      const worker = lh.worker({ queues: { q: { handler: async () => {} } } });
      const err = await rejection(worker.start());
      expect(isLeaseholdError(err, 'SCHEMA_VERSION')).toBe(true);
      expect((err as Error).message).toMatch(/version 999, newer than this Leasehold/);
    } finally {
      await lh.close();
      await dropSchema(schema);
    }
  });

  it('start() as a role the server does not know rejects with DATABASE (its SQLSTATE) and starts nothing', async () => {
    const url = new URL(databaseUrl());
    url.username = `lh_nobody_${randomBytes(4).toString('hex')}`;
    url.password = 'wrong';
    const lh = closeAfterTest(new Leasehold({ connectionString: url.toString(), schema: uniqueSchema() }));
    const worker = lh.worker({ queues: { q: { handler: async () => {} } } });
    const events: string[] = [];
    worker.on('started', () => events.push('started'));
    worker.on('error', () => events.push('error'));
    const err = await rejection(worker.start());
    expect(isLeaseholdError(err, 'DATABASE'), String(err)).toBe(true);
    const dbErr = err as DatabaseError;
    expect(dbErr.message).toMatch(/^start failed: /);
    // A refused login: "role ... does not exist" (28000) or a failed password (28P01) by the server's rules.
    expect(dbErr.sqlState).toMatch(/^28/);
    expect(dbErr.message).not.toContain('wrong');
    expect(events).toEqual([]);
    await worker.stop();
  });

  it('start() as a login with no privilege on the schema rejects with PERMISSION_DENIED and starts nothing', async () => {
    const owner = await migratedClient();
    const login = await createLogin([]);
    const lh = closeAfterTest(new Leasehold({ connectionString: login.url, schema: owner.schema }));
    const worker = lh.worker({ queues: { q: { handler: async () => {} } } });
    const events: string[] = [];
    worker.on('started', () => events.push('started'));
    worker.on('error', () => events.push('error'));
    const err = await rejection(worker.start());
    expect(isLeaseholdError(err, 'PERMISSION_DENIED'), String(err)).toBe(true);
    expect((err as Error).message).toMatch(/^start failed: permission denied/);
    expect(events).toEqual([]);
    await worker.stop();
  });

  it('migrate() against a refused port rejects with DATABASE, the errno in errno, not in sqlState', async () => {
    const lh = closeAfterTest(
      new Leasehold({ connectionString: await refusedUrl(), schema: uniqueSchema() }),
    );
    const err = await rejection(lh.migrate());
    expect(isLeaseholdError(err, 'DATABASE')).toBe(true);
    expect((err as DatabaseError).sqlState).toBeUndefined();
    expect((err as DatabaseError).errno).toBe('ECONNREFUSED');
    expect((err as Error).message).toMatch(/^migrate failed: /);
  });
});

describe('errors speak the API', () => {
  it('a call to a down server names the call, keeps the statement apart, and holds no errno in sqlState', async () => {
    const lh = closeAfterTest(
      new Leasehold({ connectionString: await refusedUrl(), schema: uniqueSchema() }),
    );
    const err = await rejection(lh.enqueue('emails', { to: 'a' }));
    expect(isLeaseholdError(err, 'DATABASE')).toBe(true);
    const dbErr = err as DatabaseError;
    expect(dbErr.message).toMatch(/^enqueue failed: /);
    expect(dbErr.message).not.toMatch(/leasehold_/);
    expect(dbErr.statement).toMatch(/^leasehold_enqueue/);
    expect(dbErr.sqlState).toBeUndefined();
    expect(dbErr.errno).toBe('ECONNREFUSED');
    const got = await rejection(lh.getJob('1'));
    expect((got as Error).message).toMatch(/^getJob failed: /);
  });

  it('every call after close() rejects with CLIENT_CLOSED, never the pool driver words', async () => {
    const lh = await migratedClient();
    await lh.close();
    for (const call of [
      () => lh.enqueue('q', {}),
      () => lh.getJob('1'),
      () => lh.claim({ queue: 'q', owner: 'me' }),
      () => lh.listQueues(),
      () => lh.migrate(),
      () => lh.schedules(),
    ]) {
      const err = await rejection(call());
      expect(isLeaseholdError(err, 'CLIENT_CLOSED')).toBe(true);
      expect((err as Error).message).toMatch(/this Leasehold client is closed/);
      expect((err as Error).message).not.toMatch(/Cannot use a pool|leasehold_/);
    }
    expect(() => lh.worker({ queues: { q: { handler: async () => {} } } })).toThrow(
      /this Leasehold client is closed/,
    );
    await lh.close(); // a second close is fine
  });

  it('a worker whose client was closed fails to start with CLIENT_CLOSED', async () => {
    const lh = await migratedClient();
    const worker = lh.worker({ queues: { q: { handler: async () => {} } } });
    await lh.close();
    expect(isLeaseholdError(await rejection(worker.start()), 'CLIENT_CLOSED')).toBe(true);
  });
});

describe('an outage is reported once', () => {
  async function outageWorker(options: { listen: boolean }) {
    const setup = await migratedClient();
    const proxy = await startTcpProxy(databaseUrl());
    const lh = closeAfterTest(
      new Leasehold({
        connectionString: proxy.connectionString,
        schema: setup.schema,
        connectTimeoutMs: 1000,
      }),
    );
    const done: string[] = [];
    const worker = lh.worker({
      queues: { steady: { handler: async (job) => void done.push(job.id) } },
      pollIntervalMs: 50,
      recoveryIntervalMs: 100,
    });
    const errors: unknown[] = [];
    if (options.listen) worker.on('error', (err) => errors.push(err));
    await started(worker);
    const first = await setup.enqueue('steady', {});
    await waitFor(() => done.includes(first.id), { what: 'the first job to run' });
    return { setup, proxy, worker, done, errors };
  }

  it('unheard, a lost database gives one LEASEHOLD_DATABASE_UNREACHABLE warning (host and port, no password), then one LEASEHOLD_DATABASE_BACK, and the work goes on', async () => {
    const warnings = captureWarnings();
    const { setup, proxy, done } = await outageWorker({ listen: false });
    proxy.drop();
    // Many statements and reconnections fail during the outage: claims every 50 ms, the sweep, the listener.
    await waitFor(() => proxy.refused >= 20, { what: 'twenty refused connections', timeoutMs: 20_000 });
    const during = warnings.filter((w) => w.code?.startsWith('LEASEHOLD_DATABASE'));
    expect(during.map((w) => w.code)).toEqual(['LEASEHOLD_DATABASE_UNREACHABLE']);
    const port = new URL(proxy.connectionString).port;
    expect(during[0]?.message).toContain(`127.0.0.1:${port}`);
    const password = new URL(databaseUrl()).password;
    if (password !== '') expect(during[0]?.message).not.toContain(password);
    expect(during[0]?.message).not.toMatch(/leasehold_[a-z_]+_[0-9a-f]{10}/);

    proxy.heal();
    await waitFor(() => warnings.some((w) => w.code === 'LEASEHOLD_DATABASE_BACK'), {
      what: 'the back warning',
      timeoutMs: 20_000,
    });
    const later = await setup.enqueue('steady', {});
    await waitFor(() => done.includes(later.id), { what: 'a job enqueued after the outage to run' });
    expect(warnings.filter((w) => w.code?.startsWith('LEASEHOLD_DATABASE')).map((w) => w.code)).toEqual([
      'LEASEHOLD_DATABASE_UNREACHABLE',
      'LEASEHOLD_DATABASE_BACK',
    ]);
  });

  it('heard, an outage is one error event, not one per statement per retry', async () => {
    const warnings = captureWarnings();
    const { setup, proxy, done, errors } = await outageWorker({ listen: true });
    proxy.drop();
    await waitFor(() => proxy.refused >= 20, { what: 'twenty refused connections', timeoutMs: 20_000 });
    expect(errors).toHaveLength(1);
    // Typed whichever part heard it first (a statement, or the LISTEN connection's raw driver error).
    expect(isLeaseholdError(errors[0], 'DATABASE'), String(errors[0])).toBe(true);
    proxy.heal();
    const later = await setup.enqueue('steady', {});
    await waitFor(() => done.includes(later.id), {
      what: 'a job enqueued after the outage to run',
      timeoutMs: 20_000,
    });
    expect(errors).toHaveLength(1);
    // Heard, nothing goes to the process warnings.
    expect(warnings.filter((w) => w.code?.startsWith('LEASEHOLD_DATABASE'))).toEqual([]);
  });

  it('heard, a black-holed outage is one error event too: the listener reconnecting into the hole, where pg gives up each connect with its own "timeout expired", included', async () => {
    const setup = await migratedClient();
    // The pool and the LISTEN connection each through a proxy of their own, so the listener's
    // reconnection attempts can be counted apart from the pool's.
    const proxy = await startTcpProxy(databaseUrl());
    const listenProxy = await startTcpProxy(databaseUrl());
    const lh = closeAfterTest(
      new Leasehold({
        connectionString: proxy.connectionString,
        listenConnectionString: listenProxy.connectionString,
        schema: setup.schema,
        connectTimeoutMs: 1000,
        statementTimeoutMs: 1000,
      }),
    );
    const done: string[] = [];
    const worker = lh.worker({
      queues: { steady: { handler: async (job) => void done.push(job.id) } },
      pollIntervalMs: 50,
      recoveryIntervalMs: 100,
    });
    const errors: unknown[] = [];
    worker.on('error', (err) => errors.push(err));
    await started(worker);
    await waitFor(() => worker.listenerPid, { what: 'the listener to connect' });

    // A partition: nothing answers, every connection stays open, new ones are accepted and held.
    proxy.blackHole();
    listenProxy.blackHole();
    // The listener's connection is reset (a partition's firewall forgetting it: a server's own
    // FIN would not cross the hole): the listener reconnects into the hole, and pg's own connect
    // timer ends each attempt. Its third attempt starts only after the first two were given up
    // and reported.
    const before = listenProxy.accepted;
    listenProxy.resetConnections();
    await waitFor(() => listenProxy.accepted >= before + 3, {
      what: 'the listener to give up two connection attempts in the hole',
      timeoutMs: 20_000,
    });
    expect(errors.map(String)).toHaveLength(1);
    expect(isLeaseholdError(errors[0], 'DATABASE'), String(errors[0])).toBe(true);

    proxy.heal();
    listenProxy.heal();
    const later = await setup.enqueue('steady', {});
    await waitFor(() => done.includes(later.id), {
      what: 'a job enqueued after the outage to run',
      timeoutMs: 20_000,
    });
    expect(errors.map(String)).toHaveLength(1);
  }, 60_000);
});
