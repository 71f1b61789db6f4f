import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contextOf } from '../../src/client.js';
import { isLeaseholdError, Leasehold } from '../../src/index.js';
import { prunePass, RetentionService } from '../../src/maintenance/retention.js';
import { poolerDefaults } from '../../src/shared/pooler-env.js';
import { tryMaintenanceLock } from '../../src/storage/upkeep/maintenance-lock.js';
import {
  countByStatus,
  directDatabaseUrl,
  dropSchema,
  testPool,
  uniqueSchema,
  waitFor,
} from '../support/db.js';
import { startPgBouncer, type TestBouncer } from '../support/pgbouncer.js';
import { deferred, started } from '../support/worker.js';

// A PgBouncer of this file's own, in transaction mode with ONE server connection: every client
// shares it, so any session state one of them left behind (a prepared statement, a session lock,
// a LISTEN) would show at once in another's transaction.
let bouncer: TestBouncer;
beforeAll(async () => {
  bouncer = await startPgBouncer(directDatabaseUrl(), 1);
});
afterAll(async () => {
  await bouncer?.stop();
});

/** A migrated client behind the file's PgBouncer, configured as the docs tell operators to. */
async function pooledClient(options: { listen?: boolean } = {}): Promise<Leasehold> {
  const schema = uniqueSchema('lh_bouncer');
  const lh = new Leasehold({
    connectionString: bouncer.connectionString,
    schema,
    poolSize: 4,
    preparedStatements: false,
    // LISTEN on a direct connection beside the pooled one.
    listenConnectionString: options.listen ? directDatabaseUrl() : undefined,
    listen: options.listen ?? false,
  });
  await lh.migrate();
  cleanups.push(async () => {
    await lh.close();
    await dropSchema(schema);
  });
  return lh;
}
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

describe('behind PgBouncer in transaction mode', () => {
  it('with preparedStatements false, concurrent enqueues, claims, completions and caller transactions all work on one shared server connection', async () => {
    const lh = await pooledClient();
    const { ids } = await lh.enqueueMany(
      'shared',
      Array.from({ length: 40 }, (_, i) => ({ payload: { i } })),
    );
    // Four pool connections at once, one server connection: named statements would collide.
    const leases = (
      await Promise.all(
        Array.from({ length: 4 }, (_, n) => lh.claim({ queue: 'shared', owner: `c${n}`, limit: 10 })),
      )
    ).flat();
    expect(leases.map((l) => l.jobId).sort()).toEqual([...ids].sort());
    const accepted = await Promise.all(leases.map((lease) => lh.complete(lease)));
    expect(accepted.every(Boolean)).toBe(true);

    // A caller's own transaction through the pooler: its client runs unnamed statements too.
    const caller = new pg.Client({ connectionString: bouncer.connectionString });
    await caller.connect();
    try {
      await caller.query('BEGIN');
      await lh.enqueue('shared', { in: 'tx' }, { client: caller });
      await caller.query('ROLLBACK');
      await caller.query('BEGIN');
      const { id } = await lh.enqueue('shared', { in: 'tx' }, { client: caller });
      await caller.query('COMMIT');
      expect((await lh.getJob(id))?.status).toBe('pending');
    } finally {
      await caller.end();
    }
    expect(await countByStatus(testPool(), lh.schema)).toEqual({ succeeded: 40, pending: 1 });
  });

  it('a polling worker (listen: false) runs jobs, and one given a direct listen connection is woken by NOTIFY at once', async () => {
    const polled = await pooledClient();
    const done = deferred();
    const worker = polled.worker({ queues: { q: async () => done.resolve() }, pollIntervalMs: 50 });
    await started(worker);
    expect(worker.listenerPid).toBeNull();
    await polled.enqueue('q', {});
    await done.promise;

    const listening = await pooledClient({ listen: true });
    const woken = deferred<string>();
    const idle = listening.worker({
      queues: { wake: async (job) => woken.resolve(job.id) },
      pollIntervalMs: 3_600_000,
    });
    await started(idle);
    const pid = await waitFor(() => idle.listenerPid, { what: 'the direct listener' });
    // The listener is a real session on the server, not a pooled one.
    const { rows } = await testPool().query(`SELECT query FROM pg_stat_activity WHERE pid = $1`, [pid]);
    expect(rows[0]?.query).toMatch(/^LISTEN/);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const { id } = await listening.enqueue('wake', {});
    const winner = await Promise.race([
      woken.promise,
      new Promise<string>((resolve) => setTimeout(() => resolve('no wake-up within 5 s'), 5000)),
    ]);
    expect(winner).toBe(id);
  });

  it('retention takes its lock per batch transaction: passes follow each other, and one is skipped only while another holds the lock', async () => {
    const lh = new Leasehold({
      connectionString: bouncer.connectionString,
      schema: (await pooledClient()).schema,
      poolSize: 2,
      preparedStatements: false,
      succeededRetentionMs: 0,
    });
    cleanups.unshift(() => lh.close());
    // After each batch, whether the retention lock is still held anywhere on the server: it may not outlive
    // its batch's transaction, or the pooler would hand the session holding it to other clients.
    const heldBetweenBatches: number[] = [];
    const observer = testPool();
    const service = new RetentionService({
      intervalMs: 60_000,
      pool: lh.pool,
      schema: lh.schema,
      prune: (runBatch) =>
        prunePass(
          async (batch) => {
            const result = await runBatch(batch);
            // This schema's retention lock: class 0x4c4d, key hashtext('retention:<schema>').
            const { rows } = await observer.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_locks
               WHERE locktype = 'advisory' AND granted AND classid = x'4c4d'::int
                 AND objid::bigint = (hashtext($1)::bigint & 4294967295)`,
              [`retention:${lh.schema}`],
            );
            heldBetweenBatches.push(rows[0]?.n ?? -1);
            return result;
          },
          lh.schema,
          { succeededRetentionMs: 0, batchSize: 2, limit: 1000 },
        ),
    });
    await lh.enqueueMany(
      'old',
      Array.from({ length: 5 }, (_, i) => ({ payload: i })),
    );
    for (const lease of await lh.claim({ queue: 'old', owner: 'w', limit: 5 })) await lh.complete(lease);
    // Several batches, then another pass: a lock left on the shared server connection would skip it.
    expect(await service.runOnce()).toEqual({ succeeded: 5, terminal: 0, skipped: false });
    expect(await service.runOnce()).toEqual({ succeeded: 0, terminal: 0, skipped: false });
    expect(heldBetweenBatches.length).toBeGreaterThan(3);
    expect(heldBetweenBatches.every((n) => n === 0)).toBe(true);
    const holder = new pg.Client({ connectionString: directDatabaseUrl() });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      expect(await tryMaintenanceLock(holder, lh.schema, 'retention')).toBe(true);
      expect(await service.runOnce()).toEqual({ succeeded: 0, terminal: 0, skipped: true });
      await holder.query('COMMIT');
      expect((await service.runOnce()).skipped).toBe(false);
    } finally {
      await holder.end();
    }
  });
});

describe('LEASEHOLD_POOLER and LEASEHOLD_LISTEN_DATABASE_URL', () => {
  it('transaction mode turns prepared statements and listening off, unless a listen URL is given; explicit options win', () => {
    expect(poolerDefaults({}, undefined)).toEqual({
      preparedStatements: true,
      listen: true,
      listenConnectionString: undefined,
    });
    expect(poolerDefaults({ LEASEHOLD_POOLER: 'transaction' }, undefined)).toEqual({
      preparedStatements: false,
      listen: false,
      listenConnectionString: undefined,
    });
    expect(
      poolerDefaults(
        { LEASEHOLD_POOLER: 'transaction', LEASEHOLD_LISTEN_DATABASE_URL: 'postgres://direct/db' },
        undefined,
      ),
    ).toEqual({ preparedStatements: false, listen: true, listenConnectionString: 'postgres://direct/db' });
    expect(poolerDefaults({ LEASEHOLD_POOLER: 'transaction' }, 'postgres://given/db').listen).toBe(true);
    const lh = new Leasehold({
      connectionString: 'postgres://127.0.0.1:1/none',
      preparedStatements: false,
      listen: true,
      listenConnectionString: 'postgres://127.0.0.1:2/direct',
    });
    // The listen connection's settings are no longer public (they may hold a password): read the context.
    const { listenConnection } = contextOf(lh);
    expect([lh.preparedStatements, lh.listen, listenConnection]).toEqual([
      false,
      true,
      { connectionString: 'postgres://127.0.0.1:2/direct' },
    ]);
  });

  it('refuses an unknown pooler mode, and non-boolean or empty settings, with a ValidationError', async () => {
    expect(() => poolerDefaults({ LEASEHOLD_POOLER: 'statement' }, undefined)).toThrow(/LEASEHOLD_POOLER/);
    const refusals = [
      () =>
        new Leasehold({ connectionString: 'postgres://x/y', preparedStatements: 'no' as unknown as boolean }),
      () => new Leasehold({ connectionString: 'postgres://x/y', listen: 1 as unknown as boolean }),
      () => new Leasehold({ connectionString: 'postgres://x/y', listenConnectionString: '' }),
    ];
    for (const refuse of refusals) {
      let error: unknown;
      try {
        refuse();
      } catch (err) {
        error = err;
      }
      expect(isLeaseholdError(error, 'VALIDATION'), String(error)).toBe(true);
    }
  });
});
