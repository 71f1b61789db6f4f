import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { resolveConnectionSettings } from '../../src/connection/settings.js';
import { isLeaseholdError, Leasehold, ValidationError } from '../../src/index.js';
import { WakeupListener } from '../../src/runtime/listener.js';
import { databaseUrl, pooled, testPool, uniqueSchema, waitFor } from '../support/db.js';

function refusal(build: () => unknown): ValidationError {
  try {
    build();
  } catch (err) {
    return err as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

describe('connection settings', () => {
  it('parses a libpq multi-host URL, which pg itself cannot, into a host list with its session check', () => {
    const settings = resolveConnectionSettings({
      connectionString:
        'postgres://u:p%40ss@db-a:55501,[::1]:55502,db-c/app?sslmode=disable&target_session_attrs=read-write',
    });
    expect(settings).toEqual({
      base: { connectionString: 'postgres://u:p%40ss@db-a:55501/app?sslmode=disable' },
      hosts: [
        { host: 'db-a', port: 55501 },
        { host: '::1', port: 55502 },
        { host: 'db-c', port: 5432 },
      ],
      targetSessionAttrs: 'read-write',
    });
    // One host and no check: the string goes to pg exactly as given.
    expect(resolveConnectionSettings({ connectionString: 'postgres://u@h:1/d' })).toEqual({
      base: { connectionString: 'postgres://u@h:1/d' },
      hosts: null,
      targetSessionAttrs: 'any',
    });
    // One host with a check is a list of one: the check still runs.
    expect(
      resolveConnectionSettings({ connectionString: 'postgres://u@h:7/d', targetSessionAttrs: 'primary' })
        .hosts,
    ).toEqual([{ host: 'h', port: 7 }]);
    expect(
      resolveConnectionSettings({
        connectionString: 'postgres://u@h/d',
        hosts: [{ host: 'a' }, { host: 'b', port: 2 }],
      }).hosts,
    ).toEqual([
      { host: 'a', port: 5432 },
      { host: 'b', port: 2 },
    ]);
  });

  it('refuses bad connection settings up front with a ValidationError that never repeats the password', () => {
    const cases: [() => unknown, string, RegExp][] = [
      [
        () => new Leasehold({ connectionString: 'postgres://u:secret@a:99999,b/db' }),
        'connectionString',
        /1\.\.65535/,
      ],
      [
        () => new Leasehold({ connectionString: 'postgres://u:secret@a:1,,b/db' }),
        'connectionString',
        /malformed host/,
      ],
      [
        () => new Leasehold({ connectionString: 'postgres://u:secret@[oops/db' }),
        'connectionString',
        /valid connection URL/,
      ],
      [
        () => new Leasehold({ connectionString: 'postgres://u:secret@a,b/db?target_session_attrs=standby' }),
        'connectionString target_session_attrs',
        /read-write/,
      ],
      [
        () => new Leasehold({ connectionString: 'postgres://u@a/db?host=x,y' }),
        'connectionString',
        /authority/,
      ],
      [() => new Leasehold({ connectionString: 'postgres://u@a/db', hosts: [] }), 'hosts', /1 to 16/],
      [
        () => new Leasehold({ connectionString: 'postgres://u@a/db', hosts: [{ host: 'a b' }] }),
        'hosts[0].host',
        /host/,
      ],
      [
        () => new Leasehold({ connectionString: 'postgres://u@a/db', hosts: [{ host: 'a', port: 0 }] }),
        'hosts[0].port',
        /1\.\.65535/,
      ],
      [
        () => new Leasehold({ pool: testPool(1), hosts: [{ host: 'a' }] }),
        'hosts',
        /cannot be combined with pool/,
      ],
      [
        () => new Leasehold({ connectionString: 'postgres://u@a/db', statementTimeoutMs: -1 }),
        'statementTimeoutMs',
        /./,
      ],
      [
        () =>
          new Leasehold({
            connectionString: 'postgres://u@a/db',
            listenConnectionString: 'postgres://u:secret@a,,b/d',
          }),
        'listenConnectionString',
        /malformed/,
      ],
    ];
    for (const [build, field, message] of cases) {
      const err = refusal(build);
      expect(err).toBeInstanceOf(ValidationError);
      expect([err.code, err.field]).toEqual(['VALIDATION', field]);
      expect(err.message).toMatch(message);
      expect(err.message).not.toContain('secret');
    }
  });
});

describe('the listener connect path', () => {
  it('a connect that throws synchronously or rejects is retried with backoff and never rejects unhandled', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const attempts: number[] = [];
    const errors: unknown[] = [];
    const listener = new WakeupListener({
      connection: {
        connect: (() => {
          attempts.push(performance.now());
          // Alternate the two ways a connect can fail.
          if (attempts.length % 2 === 1) throw new TypeError('Invalid URL (thrown synchronously)');
          return Promise.reject(new Error('connect ECONNREFUSED (rejected)'));
        }) as never,
        watch: () => () => {},
      },
      channel: 'lh_listener_test',
      onWake: () => {},
      onConnected: () => {},
      onError: (err) => errors.push(err),
    });
    try {
      listener.start();
      await waitFor(() => attempts.length >= 4, { what: 'four connect attempts' });
      // Give any unhandled rejection of the last attempt a turn to surface.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      await listener.stop();
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
    expect(errors.map((err) => (err as Error).message).slice(0, 2)).toEqual([
      'Invalid URL (thrown synchronously)',
      'connect ECONNREFUSED (rejected)',
    ]);
    // Retries wait (jittered backoff), they do not spin.
    const stopped = attempts.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(attempts.length).toBe(stopped);
  });
});

describe('the pool Leasehold creates', () => {
  it('has TCP keepalive, a connect timeout and a statement timeout bounded like a lease; 0 turns the timeout off', async () => {
    const schema = uniqueSchema();
    const timed = new Leasehold({ connectionString: databaseUrl(), schema, statementTimeoutMs: 1500 });
    const untimed = new Leasehold({ connectionString: databaseUrl(), schema, statementTimeoutMs: 0 });
    try {
      const options = (timed.pool as unknown as { options: Record<string, unknown> }).options;
      expect(options).toMatchObject({
        keepAlive: true,
        keepAliveInitialDelayMillis: 10_000,
        connectionTimeoutMillis: 10_000,
        query_timeout: 6500,
      });
      expect(
        (untimed.pool as unknown as { options: Record<string, unknown> }).options.query_timeout,
      ).toBeUndefined();
      const setting = async (lh: Leasehold) =>
        (await lh.pool.query<{ v: string }>("SELECT current_setting('statement_timeout') AS v")).rows[0]?.v;
      // Behind a transaction pooler a session SET would leak to other clients: it is not sent.
      expect(await setting(timed)).toBe(pooled() ? '0' : '1500ms');
      expect(await setting(untimed)).toBe('0');
      // The server's timeout answers first, with its own SQLSTATE, not the client's.
      const err = await timed.pool.query('SELECT pg_sleep(3)').catch((e: unknown) => e);
      expect((err as { code?: string }).code).toBe(pooled() ? undefined : '57014');
    } finally {
      await timed.close();
      await untimed.close();
    }
  });
});

describe('a worker on a pool whose settings pg cannot parse', () => {
  it('refuses to start with a DatabaseError naming the bad URL, without an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    // The reported crash: a multi-host URL handed straight to pg, whose Client throws 'Invalid URL'.
    const pool = new pg.Pool({ connectionString: 'postgres://u@127.0.0.1:1,127.0.0.1:2/db' });
    pool.on('error', () => {});
    const lh = new Leasehold({ pool, schema: uniqueSchema(), listen: true });
    const errors: unknown[] = [];
    const worker = lh.worker({ queues: { q: async () => {} }, pollIntervalMs: 60_000 });
    worker.on('error', (err) => errors.push(err));
    try {
      // start() reaches the database first (issue 38): the settings that cannot reach it are
      // reported by start() itself, and nothing is left running to retry.
      const refused = await worker.start().then(
        () => null,
        (err: unknown) => err,
      );
      expect(isLeaseholdError(refused, 'DATABASE')).toBe(true);
      expect(String(refused)).toMatch(/^DatabaseError: start failed: Invalid URL/);
      await new Promise((resolve) => setImmediate(resolve));
      expect(errors).toEqual([]);
    } finally {
      await worker.stop();
      await pool.end();
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });
});
