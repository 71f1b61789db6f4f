import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  isLeaseholdError,
  Leasehold,
  PermanentError,
  PermissionError,
  SnoozeError,
  startEmbeddedPostgres,
} from '../../src/index.js';
import { loadMigrations } from '../../src/migrations/migrator.js';
import { usePrivateCli } from '../support/cli-build.js';
import {
  countByStatus,
  directDatabaseUrl,
  dropSchema,
  expireLease,
  migratedClient,
  testPool,
  uniqueSchema,
  waitFor,
} from '../support/db.js';
import {
  asSuperuser,
  clientAs,
  createLogin,
  roleClient,
  schemaRole,
  track,
  urlFor,
} from '../support/roles.js';
import { started } from '../support/worker.js';

const noBackoff = { baseMs: 0, maxMs: 0 };

/** The roles migration 016 creates for `schema`, in the order grant_roles() reports them. */
function rolesOf(schema: string): string[] {
  return [schemaRole(schema, 'producer'), schemaRole(schema, 'worker'), schemaRole(schema, 'admin')];
}

/** Awaits `action`, which must fail with a PermissionError whose message matches `what`. */
async function expectDenied(action: Promise<unknown>, what: RegExp): Promise<PermissionError> {
  const err = await action.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PermissionError);
  expect(isLeaseholdError(err, 'PERMISSION_DENIED')).toBe(true);
  const denied = err as PermissionError;
  expect(denied.sqlState).toBe('42501');
  expect(denied.message).toMatch(what);
  // The message says which role would allow it.
  expect(denied.message).toMatch(/<schema>_admin runs operations/);
  return denied;
}

/** The schema's grants and policies, as the catalogs hold them. */
async function accessSnapshot(pool: pg.Pool, schema: string): Promise<unknown[]> {
  const { rows } = await pool.query(
    `SELECT c.relname, c.relacl::text AS acl,
            (SELECT array_agg(a.attname || '=' || a.attacl::text ORDER BY a.attnum)
             FROM pg_attribute AS a WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL) AS columns,
            (SELECT array_agg(p.policyname || ':' || p.permissive || ':' || p.cmd || ':' || p.roles::text
                              || ':' || coalesce(p.qual, '') || ':' || coalesce(p.with_check, '') ORDER BY p.policyname)
             FROM pg_policies AS p WHERE p.schemaname = $1 AND p.tablename = c.relname) AS policies,
            c.relrowsecurity, c.relforcerowsecurity
     FROM pg_class AS c
     WHERE c.relnamespace = $1::regnamespace
     ORDER BY c.relname`,
    [schema],
  );
  const functions = await pool.query(
    `SELECT p.proname, p.proacl::text AS acl FROM pg_proc AS p
     WHERE p.pronamespace = $1::regnamespace ORDER BY p.proname`,
    [schema],
  );
  return [...rows, ...functions.rows];
}

describe('database roles', () => {
  it("the migration creates the schema's three group roles and grants them on the schema; grant_roles() repeats it exactly", async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const ROLES = rolesOf(lh.schema);
    const roles = await pool.query(
      'SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname = ANY($1) ORDER BY rolname',
      [ROLES],
    );
    expect(roles.rows).toEqual([...ROLES].sort().map((rolname) => ({ rolname, rolcanlogin: false })));
    const before = await accessSnapshot(pool, lh.schema);
    const again = await pool.query(`SELECT "${lh.schema}".grant_roles() AS granted`);
    // 006's leasehold_admin (on this server since the first migration) keeps an admin's grants.
    expect(again.rows[0].granted).toEqual([...ROLES, 'leasehold_admin']);
    expect(await accessSnapshot(pool, lh.schema)).toEqual(before);

    // The owner is never restricted: row-level security is on, but not forced.
    const jobs = (
      before as { relname: string; relrowsecurity: boolean; relforcerowsecurity: boolean }[]
    ).find((row) => row.relname === 'jobs');
    expect(jobs).toMatchObject({ relrowsecurity: true, relforcerowsecurity: false });

    const can = async (role: string, object: string, privilege: string) => {
      const [table, column] = object.split('.');
      const target = `"${lh.schema}".${table}`;
      const { rows } = column
        ? await pool.query('SELECT has_column_privilege($1, $2, $3, $4) AS ok', [
            role,
            target,
            column,
            privilege,
          ])
        : await pool.query('SELECT has_table_privilege($1, $2, $3) AS ok', [role, target, privilege]);
      return rows[0].ok as boolean;
    };
    const [producer, worker, admin] = ROLES as [string, string, string];
    // A few facts that the behaviour tests below rely on, stated directly.
    expect(await can(producer, 'jobs.status', 'SELECT')).toBe(true);
    expect(await can(producer, 'jobs.payload', 'SELECT')).toBe(false);
    expect(await can(producer, 'jobs.payload', 'INSERT')).toBe(false);
    expect(await can(worker, 'jobs.payload', 'SELECT')).toBe(false);
    expect(await can(worker, 'jobs.lease_claim_id', 'UPDATE')).toBe(false);
    expect(await can(worker, 'jobs', 'DELETE')).toBe(false);
    expect(await can(worker, 'finished_jobs', 'INSERT')).toBe(false);
    expect(await can(worker, 'job_events', 'INSERT')).toBe(false);
    expect(await can(admin, 'job_events', 'DELETE')).toBe(true);
    expect(await can(admin, 'migrations', 'INSERT')).toBe(false);
    // 006's cluster-wide producer and worker have nothing left on this schema.
    expect(await can('leasehold_worker', 'jobs.status', 'SELECT')).toBe(false);
    expect(await can('leasehold_producer', 'jobs.status', 'SELECT')).toBe(false);

    // Every function: SECURITY DEFINER, search_path pinned, owned by the migrating role, executable
    // by its own role and the admins only, never by PUBLIC.
    const functions = await pool.query(
      `SELECT p.proname, p.prosecdef, p.proconfig, p.proowner::regrole::text AS owner,
              has_function_privilege($2, p.oid, 'EXECUTE') AS producer,
              has_function_privilege($3, p.oid, 'EXECUTE') AS worker,
              has_function_privilege($4, p.oid, 'EXECUTE') AS admin,
              coalesce(p.proacl::text[], '{}') AS acl, obj_description(p.oid, 'pg_proc') AS tag
       FROM pg_proc AS p WHERE p.pronamespace = $1::regnamespace AND p.proname LIKE 'lh\\_%'`,
      [lh.schema, producer, worker, admin],
    );
    const { rows: me } = await pool.query('SELECT current_user AS name');
    expect(functions.rows.length).toBeGreaterThan(20);
    for (const fn of functions.rows) {
      const role = (fn.tag as string).split(':')[1];
      expect(fn).toMatchObject({
        prosecdef: true,
        proconfig: ['search_path=pg_catalog, pg_temp'],
        owner: me[0].name,
        producer: role === 'producer',
        worker: role === 'worker',
        admin: true,
      });
      expect((fn.acl as string[]).some((entry) => entry.startsWith('='))).toBe(false);
    }
  });

  it('a producer enqueues every way (one, many, keyed, ordered, in its transaction), wakes workers and reads its jobs back', async () => {
    const owner = await migratedClient();
    const producer = await roleClient(owner.schema, 'producer');
    const pool = testPool(1);
    const listener = new pg.Client({ connectionString: directDatabaseUrl() });
    await listener.connect();
    const heard: string[] = [];
    try {
      listener.on('notification', (message) => heard.push(message.payload ?? ''));
      await listener.query(`LISTEN "${owner.schema}_wakeup"`);

      const one = await producer.enqueue('mail', { to: 'ada' });
      const many = await producer.enqueueMany('mail', [{ payload: 1 }, { payload: 2, priority: 5 }]);
      const keyed = await producer.enqueue('mail', { k: 1 }, { idempotencyKey: 'order-7' });
      expect(await producer.enqueue('mail', { k: 2 }, { idempotencyKey: 'order-7' })).toEqual({
        id: keyed.id,
        created: false,
      });
      const ordered = await producer.enqueueMany('ledger', [
        { payload: 1, orderingKey: 'acct-1' },
        { payload: 2, orderingKey: 'acct-1' },
      ]);
      const client = await producer.pool.connect();
      try {
        await client.query('BEGIN');
        await producer.enqueue('billing', { in: 'tx' }, { client });
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      await waitFor(() => ['mail', 'ledger', 'billing'].every((queue) => heard.includes(queue)), {
        what: 'wake-ups of every queue enqueued to',
      });

      expect(many.ids).toHaveLength(2);
      expect(ordered.ids).toHaveLength(2);
      // Its status and history, not its payload: the producer role may not read payloads.
      const job = await producer.getJob(one.id, { history: true });
      expect(job).toMatchObject({ status: 'pending', payload: null });
      expect((await owner.getJob(one.id))?.payload).toEqual({ to: 'ada' });
      expect(job?.history.map((event) => event.kind)).toEqual(['enqueued']);
      expect(await countByStatus(pool, owner.schema)).toEqual({ pending: 7 });
      // The second job of the ordering key waits behind the first, as with any role.
      const { rows } = await pool.query(
        `SELECT awaits_predecessor FROM "${owner.schema}".jobs WHERE id = ANY($1) ORDER BY id`,
        [ordered.ids],
      );
      expect(rows.map((row) => row.awaits_predecessor)).toEqual([false, true]);
    } finally {
      await listener.end();
    }
  });

  it('a producer may not claim, complete work, replay, cancel, prune or change queues, nor insert a job that is not fresh', async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const producer = await roleClient(owner.schema, 'producer');
    const pool = testPool(1);
    const dead = await owner.enqueue('mail', { to: 'bob' }, { maxAttempts: 1 });
    const [deadLease] = await owner.claim({ queue: 'mail', owner: 'w' });
    await owner.fail(deadLease!, new Error('no'), { retryable: false });
    await owner.enqueue('mail', { to: 'cy' });
    const [lease] = await owner.claim({ queue: 'mail', owner: 'w' });
    const pending = await owner.enqueue('mail', { to: 'ada' });
    const before = await countByStatus(pool, owner.schema);

    await expectDenied(producer.claim({ queue: 'mail', owner: 'p' }), /permission denied for table queues/);
    await expectDenied(producer.complete(lease!), /^complete failed: permission denied for function/);
    await expectDenied(producer.recoverExpired(), /^recoverExpired failed: permission denied for function/);
    await expectDenied(producer.replay([dead.id], { reason: 'try' }), /permission denied for table/);
    await expectDenied(producer.cancel(pending.id, { reason: 'stop' }), /permission denied for table/);
    await expectDenied(producer.prune(), /permission denied for table/);
    await expectDenied(producer.pauseQueue('mail'), /permission denied for table queues/);
    // Plain SQL cannot insert a job that skips the queue: status is not an insertable column.
    await expect(
      producer.pool.query(
        `INSERT INTO "${owner.schema}".jobs (queue_name, payload, status) VALUES ('mail', '{}', 'running')`,
      ),
    ).rejects.toThrow(/permission denied for table jobs/);

    expect(await countByStatus(pool, owner.schema)).toEqual(before);
    expect((await owner.getJob(dead.id))?.status).toBe('dead');
    expect(await owner.listQueues()).toEqual([expect.objectContaining({ name: 'mail', paused: false })]);
  });

  it('a worker under the worker role runs jobs end to end: completions, retries, deaths, snoozes, renewals, effects, ordering, per-key limits, aging and recovery', async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const lh = await roleClient(owner.schema, 'worker', { backoff: noBackoff });
    const pool = testPool();
    await owner.configureQueue('limited', { concurrencyLimitPerKey: 1 });
    await owner.configureQueue('aging', { agingIntervalMs: 50 });
    await owner.pauseQueue('aging'); // never claimed: only the worker's fairness pass touches it

    const plain = await owner.enqueueMany(
      'work',
      Array.from({ length: 20 }, (_, i) => ({ payload: { kind: 'ok', i } })),
    );
    const flaky = await owner.enqueue('work', { kind: 'flaky' }, { maxAttempts: 2 });
    const permanent = await owner.enqueue('work', { kind: 'permanent' });
    const snoozy = await owner.enqueue('work', { kind: 'snooze' });
    const effect = await owner.enqueue('work', { kind: 'effect' });
    const slow = await owner.enqueue('slow', {});
    await owner.enqueueMany(
      'ordered',
      [1, 2, 3].map((n) => ({ payload: n, orderingKey: 'acct' })),
    );
    await owner.enqueueMany(
      'limited',
      [1, 2, 3].map((n) => ({ payload: n, concurrencyKey: 'tenant' })),
    );
    const aged = await owner.enqueue('aging', {}, { runAt: new Date(Date.now() - 3_600_000) });
    // A lease another worker lost (it claimed, then vanished): this worker's sweep must take it back.
    const orphan = await owner.enqueue('orphans', {});
    await owner.claim({ queue: 'orphans', owner: 'vanished', leaseMs: 60_000 });
    await expireLease(pool, owner.schema, orphan.id);

    let snoozed = false;
    const order: number[] = [];
    const errors: unknown[] = [];
    const worker = lh.worker({
      queues: {
        work: {
          concurrency: 4,
          handler: async (job) => {
            const { kind } = job.payload as { kind: string };
            if (kind === 'flaky') throw new Error('flaky');
            if (kind === 'permanent') throw new PermanentError('bad input', { code: 'BAD_INPUT' });
            if (kind === 'snooze' && !snoozed) {
              snoozed = true;
              throw new SnoozeError(10);
            }
            if (kind === 'effect') await job.effect('notify', { perform: (key) => ({ sent: key }) });
          },
        },
        // A two-second lease on a job that runs 5 s: only renewals keep it. (A one-second lease
        // lapsed once in a CI rehearsal with the load average at 10.)
        slow: {
          leaseMs: 2000,
          renew: 'alive',
          handler: () => new Promise((resolve) => setTimeout(resolve, 5000)),
        },
        ordered: {
          concurrency: 3,
          handler: async (job) => {
            order.push(job.payload as number);
          },
        },
        limited: { concurrency: 3, handler: async () => {} },
        orphans: { handler: async () => {} },
      },
      pollIntervalMs: 100,
      recoveryIntervalMs: 50,
      agingPassIntervalMs: 50,
      pruneIntervalMs: 100,
    });
    worker.on('error', (err) => errors.push(err));
    await started(worker);

    await waitFor(
      async () => {
        const counts = await countByStatus(pool, owner.schema);
        return counts.succeeded === 30 && counts.dead === 2;
      },
      { timeoutMs: 20_000, what: '30 succeeded and 2 dead' },
    );
    await waitFor(async () => ((await lh.getJob(aged.id))?.priority ?? 0) > 0, { what: 'an aged priority' });
    await waitFor(() => errors.length > 0, { what: 'the retention pass to report its role' });
    // Several more retention intervals: the denial is reported once, not every interval.
    await new Promise((resolve) => setTimeout(resolve, 600));
    await worker.stop();

    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(PermissionError);
    expect((errors[0] as Error).message).toMatch(
      /^retention is turned off in this process: its database role may not prune \(prune failed: permission denied for table/,
    );
    expect(worker.counters).toMatchObject({
      completed: 30,
      dead: 2,
      retried: 1,
      snoozed: 1,
      recovered: 1,
      lost: 0,
    });
    expect(order).toEqual([1, 2, 3]);
    expect(plain.ids).toHaveLength(20);
    const kinds = async (id: string) =>
      ((await lh.getJob(id, { history: true }))?.history ?? []).map((event) => event.kind);
    expect(await kinds(flaky.id)).toEqual(['enqueued', 'claimed', 'retried', 'claimed', 'dead']);
    expect(await kinds(permanent.id)).toEqual(['enqueued', 'claimed', 'dead']);
    expect(await kinds(snoozy.id)).toEqual(['enqueued', 'claimed', 'snoozed', 'claimed', 'completed']);
    expect(await kinds(orphan.id)).toEqual(['enqueued', 'claimed', 'lease_expired', 'claimed', 'completed']);
    const ledger = await pool.query(
      `SELECT result FROM "${owner.schema}".job_effects WHERE job_id = $1 AND name = 'notify'`,
      [effect.id],
    );
    expect(ledger.rows).toEqual([{ result: { sent: expect.any(String) } }]);
    const renewed = await pool.query(
      `SELECT lease_extensions FROM "${owner.schema}".finished_jobs WHERE id = $1`,
      [slow.id],
    );
    expect(renewed.rows[0].lease_extensions).toBeGreaterThan(0);
    // The slots per-key limits took were all given back.
    const slots = await pool.query(`SELECT running FROM "${owner.schema}".concurrency_keys`);
    expect(slots.rows).toEqual([{ running: 0 }]);
  }, 60_000);

  it('a worker under the worker role is woken by NOTIFY on its LISTEN connection', async () => {
    const owner = await migratedClient();
    const lh = await roleClient(owner.schema, 'worker');
    const producer = await roleClient(owner.schema, 'producer');
    const done: string[] = [];
    // Polling once a minute and no maintenance: only a notification can wake it within the test.
    const worker = lh.worker({
      queues: {
        mail: {
          handler: async (job) => {
            done.push(job.id);
          },
        },
      },
      pollIntervalMs: 60_000,
      recoveryIntervalMs: 0,
      agingPassIntervalMs: 0,
      pruneIntervalMs: 0,
    });
    await started(worker);
    await waitFor(() => worker.listenerPid !== null, { what: 'the LISTEN connection' });
    const { id } = await producer.enqueue('mail', {});
    await waitFor(() => done.includes(id), { what: 'the job run after its wake-up' });
  });

  it("a worker's fenced writes under the worker role: renewals, and refused completions counted and recorded", async () => {
    const owner = await migratedClient();
    const lh = await roleClient(owner.schema, 'worker');
    const pool = testPool(1);
    const { id } = await owner.enqueue('fenced', {});
    const [lease] = await lh.claim({ queue: 'fenced', owner: 'w1', leaseMs: 60_000 });
    expect(lease?.jobId).toBe(id);
    expect(await lh.heartbeat(lease!, { leaseMs: 60_000 })).toBe(true);
    await expireLease(pool, owner.schema, id);
    expect(await lh.complete(lease!)).toBe(false);
    expect(await lh.heartbeat(lease!)).toBe(false);
    expect(await lh.recoverExpired()).toEqual({ retried: 1, dead: 0 });
    expect(await lh.leaseRefusals()).toEqual([
      expect.objectContaining({ queue: 'fenced', operation: 'complete', count: 1 }),
      expect.objectContaining({ queue: 'fenced', operation: 'heartbeat', count: 1 }),
    ]);
    const history = (await lh.getJob(id, { history: true }))?.history ?? [];
    expect(history.filter((event) => event.kind === 'refused').map((event) => event.operation)).toEqual([
      'complete',
      'heartbeat',
    ]);
    expect((await owner.getJob(id))?.status).toBe('pending');
  });

  it('the worker role may not replay, cancel, skip, prune, change queues or enqueue, nor reach dead jobs with plain SQL', async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const lh = await roleClient(owner.schema, 'worker');
    const pool = testPool(1);
    const s = `"${owner.schema}"`;
    const dead = await owner.enqueue('q', { secret: 'dead-payload' }, { maxAttempts: 1, orderingKey: 'k' });
    const [lease] = await owner.claim({ queue: 'q', owner: 'w' });
    await owner.fail(lease!, new Error('no'), { retryable: false });
    const pending = await owner.enqueue('q', { secret: 'pending-payload' });
    const before = await countByStatus(pool, owner.schema);

    await expectDenied(
      lh.replay([dead.id], { reason: 'try' }),
      /^replay failed: permission denied for table/,
    );
    await expectDenied(lh.replay({ queue: 'q' }, { reason: 'try' }), /permission denied for table/);
    await expectDenied(
      lh.cancel(pending.id, { reason: 'stop' }),
      /^cancel failed: permission denied for table jobs/,
    );
    await expectDenied(
      lh.skip(dead.id, { reason: 'move on' }),
      /^skip failed: permission denied for table jobs/,
    );
    await expectDenied(lh.prune(), /^prune failed: permission denied for table/);
    await expectDenied(lh.configureQueue('q', { deadRetentionMs: 0 }), /permission denied for table queues/);
    await expectDenied(lh.pauseQueue('q'), /permission denied for table queues/);
    const enqueue = await expectDenied(
      lh.enqueue('q', { secret: 'hunter2' }),
      /^enqueue failed: permission denied for function/,
    );
    expect(enqueue.message).not.toContain('hunter2');

    // Plain SQL under the role meets the same walls: it may write no table at all (what it does, it
    // does through the schema's functions; test/hostile/hostile-roles.test.ts attacks those).
    const sql = lh.pool;
    await expect(
      sql.query(`UPDATE ${s}.jobs SET status = 'pending', finished_at = NULL WHERE id = $1`, [dead.id]),
    ).rejects.toThrow(/permission denied for table jobs/);
    await expect(
      sql.query(`DELETE FROM ${s}.jobs WHERE id = ANY($1)`, [[dead.id, pending.id]]),
    ).rejects.toThrow(/permission denied for table jobs/);
    await expect(
      sql.query(`UPDATE ${s}.jobs SET status = 'cancelled' WHERE id = $1`, [pending.id]),
    ).rejects.toThrow(/permission denied for table jobs/);
    await expect(
      sql.query(`UPDATE ${s}.jobs SET payload = '{}' WHERE id = $1`, [pending.id]),
    ).rejects.toThrow(/permission denied for table jobs/);
    await expect(
      sql.query(`INSERT INTO ${s}.job_events (job_id, queue_name, kind) VALUES ($1, 'q', 'replayed')`, [
        dead.id,
      ]),
    ).rejects.toThrow(/permission denied for table job_events/);
    await expect(sql.query(`DELETE FROM ${s}.finished_jobs`)).rejects.toThrow(/permission denied/);
    await expect(sql.query(`DELETE FROM ${s}.job_effects`)).rejects.toThrow(/permission denied/);
    await expect(sql.query(`DELETE FROM ${s}.job_events`)).rejects.toThrow(/permission denied/);

    expect(await countByStatus(pool, owner.schema)).toEqual(before);
    expect((await owner.getJob(dead.id, { history: true }))?.history.map((event) => event.kind)).toEqual([
      'enqueued',
      'claimed',
      'dead',
    ]);
    expect((await owner.getJob(pending.id))?.status).toBe('pending');
    expect(await owner.listQueues()).toEqual([expect.objectContaining({ name: 'q', paused: false })]);
    // Reading is allowed: a worker's metrics and logs may look at dead work.
    expect((await lh.listDead()).jobs.map((job) => job.id)).toEqual([dead.id]);
  });

  it('migrate() under a role that may not change the schema only reads an up-to-date schema, and refuses to create one', async () => {
    const owner = await migratedClient();
    const latest = loadMigrations().at(-1)?.version;
    for (const kind of ['producer', 'worker', 'admin'] as const) {
      const lh = await roleClient(owner.schema, kind);
      expect(await lh.migrate()).toEqual({ applied: [], version: latest, notices: [] });
    }
    const fresh = await clientAs([schemaRole(owner.schema, 'worker')], uniqueSchema('lh_roles_fresh'));
    await expectDenied(fresh.migrate(), /^migrate failed: permission denied for database/);
  });

  it('a schema owner that may not create roles migrates with a notice; once a superuser makes the roles, grant_roles() grants them and its functions run as the owner', async () => {
    const login = await createLogin([], { createSchemas: true });
    const schema = uniqueSchema('lh_roles_owner');
    const owner = track(new Leasehold({ connectionString: login.url, schema, poolSize: 2 }));
    try {
      const result = await owner.migrate();
      expect(result.applied).toEqual(loadMigrations().map((m) => m.version));
      // 006's cluster-wide roles exist on this server; the schema's own do not, and this owner may
      // not create them. Only 016's notices are reported (006's would send the operator the wrong way).
      expect(result.notices).toEqual(
        rolesOf(schema).map(
          (role) =>
            `role ${role} does not exist and ${login.name} may not create roles; its grants on schema ${schema} were skipped. ` +
            `Have a superuser run CREATE ROLE ${role} NOLOGIN, then run SELECT ${schema}.grant_roles();`,
        ),
      );
      await asSuperuser(async (client) => {
        for (const role of rolesOf(schema)) await client.query(`CREATE ROLE ${role} NOLOGIN`);
      });
      const granted = await owner.pool.query(`SELECT ${schema}.grant_roles() AS granted`);
      expect(granted.rows[0].granted).toEqual([...rolesOf(schema), 'leasehold_admin']);
      const lh = await roleClient(schema, 'worker');
      const { id } = await owner.enqueue('q', {});
      const [lease] = await lh.claim({ queue: 'q', owner: 'w' });
      expect(lease?.jobId).toBe(id);
      expect(await lh.complete(lease!)).toBe(true);
      // The functions belong to the owner who migrated, not to a superuser.
      const owners = await owner.pool.query(
        `SELECT DISTINCT proowner::regrole::text AS owner FROM pg_proc
         WHERE pronamespace = $1::regnamespace AND prosecdef`,
        [schema],
      );
      expect(owners.rows).toEqual([{ owner: login.name }]);
    } finally {
      // Its roles are the server's: dropped with the schema (the login goes after the file).
      await dropSchema(schema);
    }
  });

  it('without the roles and without CREATEROLE, migrating skips them with a notice; grant_roles() grants them once a superuser made them', async () => {
    // A server of its own: on the shared one the roles already exist.
    const server = await startEmbeddedPostgres();
    const clients: Leasehold[] = [];
    try {
      await asSuperuser(async (client) => {
        await client.query(`CREATE ROLE jobs_owner LOGIN PASSWORD 'owner-pw'`);
        await client.query('GRANT CREATE ON DATABASE postgres TO jobs_owner');
      }, server.connectionString);
      const owner = new Leasehold({
        connectionString: urlFor(server.connectionString, 'jobs_owner', 'owner-pw'),
        schema: 'jobs',
      });
      clients.push(owner);
      const result = await owner.migrate();
      expect(result.version).toBe(loadMigrations().at(-1)?.version);
      expect(result.notices).toEqual(
        rolesOf('jobs').map(
          (role) =>
            `role ${role} does not exist and jobs_owner may not create roles; its grants on schema jobs were skipped. ` +
            `Have a superuser run CREATE ROLE ${role} NOLOGIN, then run SELECT jobs.grant_roles();`,
        ),
      );
      const { id } = await owner.enqueue('q', {});

      await asSuperuser(async (client) => {
        for (const role of rolesOf('jobs')) await client.query(`CREATE ROLE ${role} NOLOGIN`);
        await client.query(`CREATE ROLE jobs_runner LOGIN PASSWORD 'worker-pw' IN ROLE jobs_worker`);
      }, server.connectionString);
      const granted = await owner.pool.query('SELECT jobs.grant_roles() AS granted');
      expect(granted.rows[0].granted).toEqual(rolesOf('jobs'));
      const worker = new Leasehold({
        connectionString: urlFor(server.connectionString, 'jobs_runner', 'worker-pw'),
        schema: 'jobs',
        viaFunctions: true,
      });
      clients.push(worker);
      const [lease] = await worker.claim({ queue: 'q', owner: 'w' });
      expect(lease?.jobId).toBe(id);
      expect(await worker.complete(lease!)).toBe(true);
      await expectDenied(worker.prune(), /^prune failed: permission denied for table/);
    } finally {
      await Promise.all(clients.map((lh) => lh.close()));
      await server.stop();
    }
  }, 120_000);
});

describe('the admin role', () => {
  const cli = usePrivateCli('roles-test');

  function runCli(args: string[]) {
    return cli.start(args).exited;
  }

  it("runs the CLI under the schema's admin role: dead list, replay, cancel, pause, resume, queues, prune and check", async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const login = await createLogin([schemaRole(owner.schema, 'admin')]);
    const conn = ['--database-url', login.url, '--schema', owner.schema];
    const { ids } = await owner.enqueueMany(
      'reports',
      [1, 2].map((n) => ({ payload: n, maxAttempts: 1 })),
    );
    for (const lease of await owner.claim({ queue: 'reports', owner: 'w', limit: 2 })) {
      await owner.fail(lease, new Error('broken'), { code: 'BROKEN' });
    }
    const pending = await owner.enqueue('mail', {});

    const list = await runCli(['dead', 'list', '--json', ...conn]);
    expect(list).toMatchObject({ code: 0, stderr: '' });
    expect(
      JSON.parse(list.stdout)
        .jobs.map((job: { id: string }) => job.id)
        .sort(),
    ).toEqual([...ids].sort());
    const replay = await runCli([
      'replay',
      ids[0]!,
      '--reason',
      'fixed',
      '--actor',
      'ops',
      '--json',
      ...conn,
    ]);
    expect(replay).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(replay.stdout)).toEqual({ replayed: 1, ids: [ids[0]] });
    const cancel = await runCli(['cancel', pending.id, '--reason', 'duplicate', '--json', ...conn]);
    expect(cancel).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(cancel.stdout)).toEqual({ id: pending.id, previousStatus: 'pending' });
    expect(await runCli(['pause', 'reports', ...conn])).toMatchObject({ code: 0, stderr: '' });
    const queues = await runCli(['queues', '--json', ...conn]);
    expect(JSON.parse(queues.stdout)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'reports', paused: true, pending: 1, dead: 1 }),
      ]),
    );
    expect(await runCli(['resume', 'reports', ...conn])).toMatchObject({ code: 0, stderr: '' });
    const prune = await runCli(['prune', '--json', ...conn]);
    expect(prune).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(prune.stdout)).toMatchObject({ skipped: false });
    expect(await runCli(['check', '--max-dead', '5', ...conn])).toMatchObject({ code: 0, stdout: 'ok\n' });

    const replayed = await owner.getJob(ids[0]!, { history: true });
    expect(replayed?.status).toBe('pending');
    expect(replayed?.history.at(-1)).toMatchObject({ kind: 'replayed', actor: 'ops', reason: 'fixed' });
    expect((await owner.getJob(pending.id))?.status).toBe('cancelled');
    // Eight CLI processes, each loading the library: 60 s ran out on a machine with a load of 12.
  }, 120_000);

  it('refuses an operator command under the worker role with one clear line naming the admin role', async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const login = await createLogin([schemaRole(owner.schema, 'worker')]);
    const { id } = await owner.enqueue('reports', {}, { maxAttempts: 1 });
    const [lease] = await owner.claim({ queue: 'reports', owner: 'w' });
    await owner.fail(lease!, new Error('broken'));
    const result = await runCli([
      'replay',
      id,
      '--reason',
      'fixed',
      '--database-url',
      login.url,
      '--schema',
      owner.schema,
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(
      /^leasehold: replay failed: permission denied for table \w+; .*<schema>_admin runs operations/,
    );
    expect((await owner.getJob(id))?.status).toBe('dead');
  }, 30_000);

  it('an admin runs every operation through the API, and runs workers whose retention prunes', async () => {
    const owner = await migratedClient({ backoff: noBackoff });
    const admin = await roleClient(owner.schema, 'admin', {
      backoff: noBackoff,
      succeededRetentionMs: 0,
    });
    const pool = testPool(1);
    const head = await admin.enqueue('ledger', { n: 1 }, { orderingKey: 'acct', maxAttempts: 1 });
    const next = await admin.enqueue('ledger', { n: 2 }, { orderingKey: 'acct' });
    const [lease] = await admin.claim({ queue: 'ledger', owner: 'w' });
    expect(await admin.fail(lease!, new Error('no'), { retryable: false })).toBe('dead');
    expect((await admin.blockedKeys()).map((key) => key.orderingKey)).toEqual(['acct']);
    await admin.skip(head.id, { reason: 'written off', actor: 'ops' });
    expect((await admin.getJob(head.id))?.status).toBe('cancelled');
    await admin.configureQueue('ledger', { owner: 'team-ledger', deadRetentionMs: 60_000 });
    expect((await admin.stats()).queues).toEqual([expect.objectContaining({ queue: 'ledger', pending: 1 })]);
    expect(await admin.checkHealth({ maxDead: 0 })).toMatchObject({ ok: true });

    const pruned: unknown[] = [];
    const errors: unknown[] = [];
    const worker = admin.worker({
      queues: { ledger: { handler: async () => {} } },
      pollIntervalMs: 100,
      pruneIntervalMs: 100,
    });
    worker.on('pruned', (result) => pruned.push(result));
    worker.on('error', (err) => errors.push(err));
    await started(worker);
    await waitFor(async () => (await admin.getJob(next.id)) === null, {
      what: 'the job completed, then pruned by the admin worker',
    });
    await worker.stop();
    expect(errors).toEqual([]);
    expect(pruned.length).toBeGreaterThan(0);
    expect(
      (await pool.query(`SELECT count(*)::int AS n FROM "${owner.schema}".finished_jobs`)).rows[0].n,
    ).toBe(0);
  });
});
