import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Lease, type Leasehold, PermissionError } from '../../src/index.js';
import {
  type ArgumentBound,
  boundMessage,
  FUNCTION_BOUNDS,
} from '../../src/storage/roles/function-bounds.js';
import { type SchemaFunction, schemaFunctions } from '../../src/storage/roles/functions.js';
import { countByStatus, migratedClient, testPool } from '../support/db.js';
import { clientAs, createLogin, roleClient, schemaRole } from '../support/roles.js';

// Issue 17: a credential of each role, used by someone who bypasses the library and writes SQL.
// Every abuse the audit found must be refused with a permission error (SQLSTATE 42501) with
// nothing changed; the functions the roles may call must not be abusable either; and the
// legitimate paths still work under each role.

let owner: Leasehold;
let other: Leasehold; // a second schema on the same server
let ownerSql: pg.Pool;
let s: string;
let workerSql: pg.Pool;
let producerSql: pg.Pool;
let legacyWorkerSql: pg.Pool; // 006's cluster-wide leasehold_worker
let worker: Leasehold;
let producer: Leasehold;

const pools: pg.Pool[] = [];
function poolAs(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => {});
  pools.push(pool);
  return pool;
}

beforeAll(async () => {
  owner = await migratedClient();
  other = await migratedClient();
  s = `"${owner.schema}"`;
  ownerSql = testPool(2);
  workerSql = poolAs((await createLogin([schemaRole(owner.schema, 'worker')])).url);
  producerSql = poolAs((await createLogin([schemaRole(owner.schema, 'producer')])).url);
  legacyWorkerSql = poolAs((await createLogin(['leasehold_worker', 'leasehold_producer'])).url);
  worker = await roleClient(owner.schema, 'worker');
  producer = await roleClient(owner.schema, 'producer');
});

afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end()));
});

/** Everything a schema holds, row by row, as its owner reads it. */
async function snapshot(schema: string): Promise<Record<string, unknown[]>> {
  const tables = [
    'jobs',
    'finished_jobs',
    'job_events',
    'job_keys',
    'ordering_keys',
    'concurrency_keys',
    'job_effects',
    'lease_refusals',
    'queues',
    // 011-015: schedules, dedupe keys, flows, rate limits.
    'schedules',
    'schedule_ticks',
    'dedupe_keys',
    'flows',
    'flow_nodes',
    'job_dependencies',
    'rate_limits',
    'rate_limit_keys',
  ];
  const out: Record<string, unknown[]> = {};
  for (const table of tables) {
    const { rows } = await ownerSql.query(`SELECT to_jsonb(t) AS row FROM "${schema}".${table} AS t`);
    out[table] = rows
      .map((row) => row.row)
      .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  }
  return out;
}

/** A queue in every state worth attacking: pending, running (a live lease), dead, keyed, ordered. */
async function scene(queue: string) {
  const pending = await owner.enqueue(queue, { secret: `${queue}-pending` });
  const running = await owner.enqueue(queue, { secret: `${queue}-running` }, { priority: 9 });
  const [lease] = await owner.claim({ queue, owner: 'honest', leaseMs: 60_000 });
  expect(lease?.jobId).toBe(running.id);
  const keyed = await owner.enqueue(queue, { secret: 'keyed' }, { idempotencyKey: `${queue}-key` });
  const ordered = await owner.enqueueMany(queue, [
    { payload: { n: 1 }, orderingKey: `${queue}-acct` },
    { payload: { n: 2 }, orderingKey: `${queue}-acct` },
  ]);
  return { pending, running, lease: lease as Lease, keyed, ordered };
}

/** `attempt` must fail with SQLSTATE 42501 and leave the schema exactly as it was. */
async function refused(attempt: () => Promise<unknown>, schema = owner.schema): Promise<void> {
  const before = await snapshot(schema);
  const err = await attempt().then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, 'the attempt succeeded').not.toBeNull();
  const code = (err as { code?: string; sqlState?: string }).sqlState ?? (err as { code?: string }).code;
  expect(code).toBe('42501');
  expect(await snapshot(schema)).toEqual(before);
}

describe('a leaked worker credential', () => {
  it('cannot read payloads: not by column, not by row, not through getJob', async () => {
    const { pending } = await scene('w-read');
    await refused(() => workerSql.query(`SELECT payload FROM ${s}.jobs`));
    await refused(() => workerSql.query(`SELECT * FROM ${s}.jobs`));
    await refused(() => workerSql.query(`SELECT to_jsonb(j) FROM ${s}.jobs AS j`));
    // What it may read: the job's state, without its payload.
    const job = await worker.getJob(pending.id);
    expect(job).toMatchObject({ id: pending.id, status: 'pending', payload: null });
  });

  it("cannot take over another worker's live lease, reset attempts, or move pending jobs to dead", async () => {
    const { running, pending } = await scene('w-take');
    await refused(() =>
      workerSql.query(
        `UPDATE ${s}.jobs SET lease_owner = 'thief', lease_token = lease_token + 1,
                lease_expires_at = now() + interval '1 day' WHERE id = $1`,
        [running.id],
      ),
    );
    await refused(() =>
      workerSql.query(`UPDATE ${s}.jobs SET attempt_count = 0 WHERE id = $1`, [running.id]),
    );
    await refused(() =>
      workerSql.query(`UPDATE ${s}.jobs SET status = 'dead', finished_at = now() WHERE id = $1`, [
        pending.id,
      ]),
    );
    await refused(() =>
      workerSql.query(`UPDATE ${s}.jobs SET status = 'dead', finished_at = now() WHERE status = 'pending'`),
    );
  });

  it('cannot delete a running job or insert a fake finished record', async () => {
    const { running } = await scene('w-delete');
    await refused(() => workerSql.query(`DELETE FROM ${s}.jobs WHERE id = $1`, [running.id]));
    await refused(() =>
      workerSql.query(
        `INSERT INTO ${s}.finished_jobs (id, queue_name, priority, attempt_count, max_attempts, lease_owner,
                                         lease_token, lease_claim_id, created_at, claimed_at, finished_at, lease_extensions)
         VALUES ($1, 'w-delete', 0, 1, 25, 'thief', 1, 1, now(), now(), now(), 0)`,
        [running.id],
      ),
    );
    await refused(() => workerSql.query(`DELETE FROM ${s}.job_events`));
    await refused(() =>
      workerSql.query(
        `INSERT INTO ${s}.job_effects (job_id, name, effect_key, attempt, lease_token) VALUES ($1, 'x', 'k', 1, 1)`,
        [running.id],
      ),
    );
  });

  it('cannot enqueue, nor call the producer functions', async () => {
    await scene('w-enqueue');
    const enqueueOne = schemaFunctions(owner.schema).find((fn) => fn.label === 'enqueue_one');
    await refused(() =>
      workerSql.query(enqueueOne?.call.text ?? '', [
        'w-enqueue',
        '{}',
        0,
        null,
        0,
        1,
        `${owner.schema}_wakeup`,
        null,
      ]),
    );
    await refused(() => worker.enqueue('w-enqueue', { forged: true }));
  });

  it("cannot complete, fail, renew or snooze another worker's lease through its functions: a wrong claim id is refused", async () => {
    const { lease } = await scene('w-fence');
    const forged = { ...lease, claimId: lease.claimId === '1' ? '2' : '1' };
    const jobBefore = (await snapshot(owner.schema)).jobs;
    expect(await worker.complete(forged)).toBe(false);
    expect(await worker.heartbeat(forged, { leaseMs: 3_600_000 })).toBe(false);
    expect(await worker.snooze(forged, 0)).toBe(false);
    expect(await worker.fail(forged, new Error('forged'), { retryable: false })).toBe('lost');
    // The refusals were counted, and nothing about any job changed.
    expect((await snapshot(owner.schema)).jobs).toEqual(jobBefore);
    const refusals = await owner.leaseRefusals();
    expect(refusals.filter((r) => r.queue === 'w-fence').map((r) => [r.operation, r.count])).toEqual(
      expect.arrayContaining([
        ['complete', 1],
        ['heartbeat', 1],
        ['snooze', 1],
        ['fail', 1],
      ]),
    );
    // The honest holder still completes.
    expect(await owner.complete(lease)).toBe(true);
  });

  it('cannot release a flow child without an accepted completion: a wrong claim id releases nothing', async () => {
    const { ids } = await owner.enqueueFlow([
      { ref: 'parent', queue: 'w-flow', payload: {} },
      { ref: 'child', queue: 'w-flow', payload: {}, dependsOn: ['parent'] },
    ]);
    const [lease] = await owner.claim({ queue: 'w-flow', owner: 'honest', leaseMs: 60_000 });
    expect(lease?.jobId).toBe(ids.parent);
    const forged = { ...(lease as Lease), claimId: lease?.claimId === '1' ? '2' : '1' };
    const before = await snapshot(owner.schema);
    // Through the library and through the completion functions (with and without results).
    expect(await worker.complete(forged)).toBe(false);
    for (const label of ['complete_jobs', 'complete_jobs_with_results']) {
      const fn = schemaFunctions(owner.schema).find((f) => f.label === label);
      const fence = [[forged.jobId], [forged.token], [forged.claimId], ['honest'], [forged.jobId]];
      const { rows } = await workerSql.query(
        fn?.call.text ?? '',
        // The batch's one queue comes last ($8, or $9 with results; see complete.ts). The channels
        // are the schema's own: any other is refused before the statement (issue 32).
        label === 'complete_jobs'
          ? [...fence, `${owner.schema}_wakeup`, `${owner.schema}_finished`, 'w-flow']
          : [...fence, `${owner.schema}_wakeup`, ['{"forged":true}'], `${owner.schema}_finished`, 'w-flow'],
      );
      expect(rows, label).toEqual([]);
    }
    // Nothing released, finished or resolved; only the refusals were counted.
    const after = await snapshot(owner.schema);
    expect(after.jobs).toEqual(before.jobs);
    expect(after.job_dependencies).toEqual(before.job_dependencies);
    expect(after.finished_jobs).toEqual(before.finished_jobs);
    expect(await worker.claim({ queue: 'w-flow', owner: 'thief' })).toEqual([]);
    // Nor directly: the edges and the child's count are not the worker's to write.
    await refused(() => workerSql.query(`UPDATE ${s}.job_dependencies SET resolved = true`));
    await refused(() =>
      workerSql.query(`UPDATE ${s}.jobs SET waiting_parents = 0 WHERE id = $1`, [ids.child]),
    );
    await refused(() => workerSql.query(`DELETE FROM ${s}.job_dependencies`));
    // The honest holder's completion releases the child.
    expect(await owner.complete(lease as Lease)).toBe(true);
    expect((await worker.claim({ queue: 'w-flow', owner: 'w' })).map((l) => l.jobId)).toEqual([ids.child]);
  });

  it('cannot alter rate_limits or their windows to escape a limit', async () => {
    await owner.configureQueue('w-limit', { rateLimit: { max: 1, perMs: 3_600_000 }, concurrencyLimit: 1 });
    await owner.enqueueMany('w-limit', [{ payload: { n: 1 } }, { payload: { n: 2 } }]);
    const [first] = await worker.claim({ queue: 'w-limit', owner: 'w' });
    expect(first).toBeDefined();
    await refused(() =>
      workerSql.query(`UPDATE ${s}.rate_limits SET claimed_total = 0, throttled_until = '-infinity'`),
    );
    await refused(() => workerSql.query(`DELETE FROM ${s}.rate_limit_keys`));
    await refused(() =>
      workerSql.query(`UPDATE ${s}.rate_limit_keys SET start_at = '{}', start_n = '{}', granted = 0`),
    );
    await refused(() =>
      workerSql.query(`INSERT INTO ${s}.rate_limits (queue_name) VALUES ('w-limit-forged')`),
    );
    await refused(() =>
      workerSql.query(`UPDATE ${s}.queues SET rate_limit_max = NULL, concurrency_limit = NULL`),
    );
    // Nor through the claims: the plain and per-key claim functions yield nothing on a limited
    // queue, and the throttled one keeps the limit whatever it is asked for.
    for (const label of ['claim_jobs', 'claim_jobs_limited', 'claim_jobs_throttled']) {
      const fn = schemaFunctions(owner.schema).find((f) => f.label === label);
      const values =
        label === 'claim_jobs'
          ? ['w-limit', 'thief', 100, 60_000, 7, '-infinity']
          : label === 'claim_jobs_limited'
            ? ['w-limit', 'thief', 100, 60_000, 7, 100]
            : ['w-limit', 'thief', 100, 60_000, 1000, 7, 1];
      const { rows } = await workerSql.query(fn?.call.text ?? '', values);
      expect(
        rows.filter((row) => row.id !== null),
        label,
      ).toEqual([]);
    }
    const { rows: states } = await ownerSql.query(
      `SELECT status::text, count(*)::int AS n FROM ${s}.jobs WHERE queue_name = 'w-limit' GROUP BY status ORDER BY status`,
    );
    expect(states).toEqual([
      { status: 'pending', n: 1 },
      { status: 'running', n: 1 },
    ]);
    expect(await worker.complete(first as Lease)).toBe(true);
  });

  it('has nothing on another schema: not its tables, not its functions', async () => {
    await other.enqueue('x-schema', { secret: 'other-schema' });
    const claim = schemaFunctions(other.schema).find((fn) => fn.label === 'claim_jobs');
    await refused(() => workerSql.query(`SELECT id FROM "${other.schema}".jobs`), other.schema);
    await refused(
      () => workerSql.query(claim?.call.text ?? '', ['x-schema', 'thief', 10, 60_000, 1, '-infinity']),
      other.schema,
    );
    // Through the library: a client on the other schema, logged in with this schema's worker role.
    const intruder = await clientAs([schemaRole(owner.schema, 'worker')], other.schema, {
      viaFunctions: true,
    });
    const err = await intruder.claim({ queue: 'x-schema', owner: 'thief' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PermissionError);
    expect(await countByStatus(ownerSql, other.schema)).toEqual({ pending: 1 });
    // The other schema's own worker role is the one that works there.
    const across = await roleClient(other.schema, 'worker');
    expect((await across.claim({ queue: 'x-schema', owner: 'w' })).map((l) => l.payload)).toEqual([
      { secret: 'other-schema' },
    ]);
  });
});

describe('a leaked producer credential', () => {
  it('cannot read payloads', async () => {
    const { pending } = await scene('p-read');
    await refused(() => producerSql.query(`SELECT payload FROM ${s}.jobs`));
    await refused(() => producerSql.query(`SELECT * FROM ${s}.jobs WHERE id = $1`, [pending.id]));
    expect(await producer.getJob(pending.id)).toMatchObject({ status: 'pending', payload: null });
  });

  it("cannot rewrite an ordering key's head, nor point an idempotency key at another job", async () => {
    const { ordered, pending } = await scene('p-keys');
    await refused(() =>
      producerSql.query(`UPDATE ${s}.ordering_keys SET head_id = $1 WHERE queue_name = 'p-keys'`, [
        ordered.ids[1],
      ]),
    );
    await refused(() => producerSql.query(`DELETE FROM ${s}.ordering_keys`));
    await refused(() =>
      producerSql.query(`UPDATE ${s}.job_keys SET job_id = $1 WHERE queue_name = 'p-keys'`, [pending.id]),
    );
    await refused(() =>
      producerSql.query(
        `INSERT INTO ${s}.job_keys (queue_name, idempotency_key, job_id) VALUES ('p-keys', 'hijack', $1)`,
        [pending.id],
      ),
    );
  });

  it('cannot rewrite the traceparent of a running job: not directly, not through its function', async () => {
    const { running } = await scene('p-trace');
    const forged = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await refused(() =>
      producerSql.query(`UPDATE ${s}.jobs SET traceparent = $1 WHERE status = 'running'`, [forged]),
    );
    // The attach function touches only a pending job without a trace: what an enqueue just made.
    const attach = schemaFunctions(owner.schema).find((fn) => fn.label === 'attach_traceparent');
    const before = await snapshot(owner.schema);
    await producerSql.query(attach?.call.text ?? '', [[running.id], forged]);
    expect(await snapshot(owner.schema)).toEqual(before);
  });

  it('cannot insert jobs with chosen ids (OVERRIDING SYSTEM VALUE), or insert at all but through enqueue', async () => {
    await scene('p-ids');
    const { rows } = await ownerSql.query(`SELECT max(id) + 1 AS next FROM ${s}.jobs`);
    await refused(() =>
      producerSql.query(
        `INSERT INTO ${s}.jobs (id, queue_name, payload) OVERRIDING SYSTEM VALUE VALUES ($1, 'p-ids', '{}')`,
        [rows[0].next],
      ),
    );
    await refused(() =>
      producerSql.query(`INSERT INTO ${s}.jobs (queue_name, payload) VALUES ('p-ids', '{}')`),
    );
    await refused(() => producerSql.query(`SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id'))`));
    // Others' enqueues go on as before.
    expect((await producer.enqueue('p-ids', { fine: true })).created).toBe(true);
  });

  it('cannot rewrite dedupe keys, schedule ticks, rate limits or flows directly', async () => {
    const { pending } = await scene('p-tables');
    const keyed = await owner.enqueue('p-tables', { d: 1 }, { dedupe: { key: 'k', mode: 'replace' } });
    await owner.schedule('p-tables', { cron: '0 0 1 1 *', queue: 'p-tables' });
    await owner.configureQueue('p-tables-limited', { rateLimit: { max: 1, perMs: 60_000 } });
    const { ids } = await owner.enqueueFlow([
      { ref: 'a', queue: 'p-tables', payload: {} },
      { ref: 'b', queue: 'p-tables', payload: {}, dependsOn: ['a'] },
    ]);
    // dedupe_keys: neither read nor written but by the enqueue function.
    await refused(() => producerSql.query(`SELECT * FROM ${s}.dedupe_keys`));
    await refused(() =>
      producerSql.query(`UPDATE ${s}.dedupe_keys SET job_id = $1 WHERE queue_name = 'p-tables'`, [
        pending.id,
      ]),
    );
    await refused(() => producerSql.query(`DELETE FROM ${s}.dedupe_keys`));
    await refused(() =>
      producerSql.query(
        `INSERT INTO ${s}.dedupe_keys (queue_name, dedupe_key, job_id, mode) VALUES ('p-tables', 'x', $1, 'replace')`,
        [keyed.id],
      ),
    );
    // schedule_ticks and schedules: readable (without a schedule's payload), never writable.
    await refused(() => producerSql.query(`SELECT payload FROM ${s}.schedules`));
    await refused(() =>
      producerSql.query(
        `INSERT INTO ${s}.schedule_ticks (schedule_name, tick_at, job_id) VALUES ('p-tables', now(), $1)`,
        [pending.id],
      ),
    );
    await refused(() => producerSql.query(`DELETE FROM ${s}.schedule_ticks`));
    await refused(() => producerSql.query(`UPDATE ${s}.schedules SET paused = true`));
    // rate limits: not its to touch at all.
    await refused(() => producerSql.query(`UPDATE ${s}.rate_limits SET claimed_total = 0`));
    await refused(() => producerSql.query(`DELETE FROM ${s}.rate_limit_keys`));
    // flows: written only by the flow function.
    await refused(() => producerSql.query(`UPDATE ${s}.job_dependencies SET resolved = true`));
    await refused(() =>
      producerSql.query(
        `INSERT INTO ${s}.job_dependencies (parent_id, child_id, flow_id)
                         SELECT $1, $2, flow_id FROM ${s}.flow_nodes WHERE job_id = $2`,
        [pending.id, ids.b],
      ),
    );
    await refused(() => producerSql.query(`DELETE FROM ${s}.flows`));
  });

  it('cannot choose the ids of a flow, nor link it to jobs it did not create', async () => {
    const { pending } = await scene('p-flow');
    const fn = schemaFunctions(owner.schema).find((f) => f.label === 'enqueue_flow');
    const node = (n: number) => [
      Array(n).fill('p-flow'),
      Array(n).fill('{}'),
      Array(n).fill(0),
      Array(n).fill(null),
      Array(n).fill(0),
      Array(n).fill(1),
      Array(n).fill(null),
    ];
    // An edge names node positions: one outside the flow (as a foreign job would be) is refused.
    const before = await snapshot(owner.schema);
    const err = await producerSql
      .query(fn?.call.text ?? '', [
        ...node(1),
        ['only'],
        [1],
        [false],
        ['block'],
        [2],
        [1],
        `${owner.schema}_wakeup`,
      ])
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect((err as { code?: string } | null)?.code).toBe('23502'); // no job id: nothing inserted
    expect(await snapshot(owner.schema)).toEqual(before);
    // What it creates gets fresh ids from the sequence, above every existing job.
    const { rows } = await producerSql.query(fn?.call.text ?? '', [
      ...node(2),
      ['a', 'b'],
      [0, 1],
      [true, false],
      ['block', 'block'],
      [1],
      [2],
      `${owner.schema}_wakeup`,
    ]);
    const ids = (rows[0] as { ids: string[] }).ids.map(BigInt);
    expect(ids[0]! > BigInt(pending.id)).toBe(true);
    const { rows: edges } = await ownerSql.query(
      `SELECT parent_id::text, child_id::text FROM ${s}.job_dependencies WHERE child_id = $1`,
      [String(ids[1])],
    );
    expect(edges).toEqual([{ parent_id: String(ids[0]), child_id: String(ids[1]) }]);
  });

  it('cannot claim or complete: the worker functions are not its to execute', async () => {
    const { lease } = await scene('p-claim');
    await refused(() => producer.claim({ queue: 'p-claim', owner: 'thief' }));
    await refused(() => producer.complete(lease));
    await refused(() => producer.recoverExpired());
  });
});

/** `attempt` must fail with SQLSTATE 22023 naming `message`, and leave the schema as it was. */
async function outOfRange(attempt: () => Promise<unknown>, message: string): Promise<void> {
  const before = await snapshot(owner.schema);
  const err = await attempt().then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, `accepted: ${message}`).not.toBeNull();
  expect((err as { code?: string }).code, String(err)).toBe('22023');
  expect((err as Error).message).toContain(message);
  expect(await snapshot(owner.schema)).toEqual(before);
}

function fnOf(label: string): SchemaFunction {
  const fn = schemaFunctions(owner.schema).find((f) => f.label === label);
  if (!fn) throw new Error(`no function ${label}`);
  return fn;
}

// A value each bound accepts, for the arguments a call leaves in range.
function inRange(bound: ArgumentBound, schema: string): unknown {
  switch (bound.kind) {
    case 'range':
      return bound.min;
    case 'chars':
      return 'x'.repeat(Math.max(1, bound.min));
    case 'channel':
      return bound.channel === 'wakeup' ? `${schema}_wakeup` : `${schema}_finished`;
    case 'matches':
      return bound.sample;
    case 'json-items':
      return '[]';
    default:
      return [];
  }
}

// Values each bound refuses.
function outOfBound(bound: ArgumentBound): unknown[] {
  switch (bound.kind) {
    case 'range':
      return [bound.min - 1, bound.max + 1, null];
    case 'each-range':
      return [[bound.min - 1], [bound.max + 1], ...(bound.nulls ? [] : [[null]])];
    case 'items':
      return [Array.from({ length: bound.max + 1 }, () => null)];
    case 'json-items':
      return [JSON.stringify(Array.from({ length: bound.max + 1 }, () => null)), '{}', null];
    case 'chars':
      return [...(bound.min > 0 ? [''] : []), 'x'.repeat(bound.max + 1)];
    case 'each-chars':
      return [['x'.repeat(bound.max + 1)]];
    case 'each-bytes':
      return [[`"${'x'.repeat(bound.max)}"`]];
    case 'channel':
      return ['somebody_elses_channel', null];
    case 'matches':
      return ['00-not-a-trace', 'x'.repeat(100_000), null];
  }
}

describe('the functions refuse what the API would never send (issue 32)', () => {
  it('every function has bounds', () => {
    const labels = schemaFunctions(owner.schema).map((fn) => fn.label);
    expect(labels.filter((label) => (FUNCTION_BOUNDS[label] ?? []).length === 0)).toEqual([]);
  });

  it('a worker cannot claim a whole queue under a 10^9-second lease, nor stretch its lease past a day', async () => {
    const { lease } = await scene('w-bounds');
    const claim = fnOf('claim_jobs');
    const max = FUNCTION_BOUNDS.claim_jobs!;
    await outOfRange(
      () => workerSql.query(claim.call.text, ['w-bounds', 'thief', 1_000_000, 1e12, '1', '-infinity']),
      boundMessage('claim_jobs', max[2]!),
    );
    await outOfRange(
      () => workerSql.query(claim.call.text, ['w-bounds', 'thief', 1, 1e12, '1', '-infinity']),
      boundMessage('claim_jobs', max[3]!),
    );
    // Its own lease, renewed for 10^9 seconds, or with no end at all (a null length).
    const extend = fnOf('extend_leases');
    for (const ms of [1e12, null]) {
      await outOfRange(
        () =>
          workerSql.query(extend.call.text, [
            [lease.jobId],
            [lease.token],
            [lease.claimId],
            [lease.owner],
            [lease.queue],
            [ms],
            [null],
            lease.queue,
          ]),
        'extend_leases: argument $6',
      );
    }
  });

  it('a producer cannot attach an unbounded text as a trace context', async () => {
    const job = await owner.enqueue('p-bounds', {});
    await outOfRange(
      () => producerSql.query(fnOf('attach_traceparent').call.text, [[job.id], 'x'.repeat(1_000_000)]),
      'attach_traceparent: argument $2',
    );
  });

  it('each function, called with each bound broken and the rest in range, refuses and changes nothing', async () => {
    await scene('bounds-all');
    const before = await snapshot(owner.schema);
    let calls = 0;
    for (const fn of schemaFunctions(owner.schema)) {
      const bounds = FUNCTION_BOUNDS[fn.label] ?? [];
      const sql = fn.role === 'worker' ? workerSql : producerSql;
      const arity = fn.call.text.split('$').length - 1;
      const base: unknown[] = Array.from({ length: arity }, () => null);
      for (const bound of bounds) base[bound.arg - 1] = inRange(bound, owner.schema);
      for (const bound of bounds) {
        for (const bad of outOfBound(bound)) {
          const args = [...base];
          args[bound.arg - 1] = bad;
          const err = await sql.query(fn.call.text, args).then(
            () => null,
            (e: unknown) => e,
          );
          expect(
            err,
            `${fn.label} $${bound.arg} = ${JSON.stringify(bad)?.slice(0, 40)} accepted`,
          ).not.toBeNull();
          expect((err as { code?: string }).code, `${fn.label}: ${String(err)}`).toBe('22023');
          expect((err as Error).message).toContain(boundMessage(fn.label, bound));
          calls += 1;
        }
      }
    }
    expect(calls).toBeGreaterThan(100);
    expect(await snapshot(owner.schema)).toEqual(before);
  });
});

describe("006's cluster-wide roles", () => {
  it('allow none of the abuses on a schema other than the default one', async () => {
    const { running } = await scene('legacy');
    await refused(() => legacyWorkerSql.query(`SELECT id FROM ${s}.jobs`));
    await refused(() => legacyWorkerSql.query(`DELETE FROM ${s}.jobs WHERE id = $1`, [running.id]));
    const claim = schemaFunctions(owner.schema).find((fn) => fn.label === 'claim_jobs');
    await refused(() =>
      legacyWorkerSql.query(claim?.call.text ?? '', ['legacy', 'thief', 10, 60_000, 1, '-infinity']),
    );
  });
});

describe('the legitimate paths under each role', () => {
  it('a worker with only the worker role claims (with the payload), renews, completes, fails, snoozes', async () => {
    const ids = await producer.enqueueMany('legit', [
      { payload: { n: 1 } },
      { payload: { n: 2 } },
      { payload: { n: 3 } },
    ]);
    const leases = await worker.claim({ queue: 'legit', owner: 'w', limit: 3 });
    expect(leases.map((l) => l.payload)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    const [a, b, c] = leases as [Lease, Lease, Lease];
    expect(await worker.heartbeat(a, { leaseMs: 30_000 })).toBe(true);
    expect(await worker.complete(a)).toBe(true);
    expect(await worker.fail(b, new Error('no'), { retryable: false })).toBe('dead');
    expect(await worker.snooze(c, 0)).toBe(true);
    expect((await owner.getJob(ids.ids[0] as string))?.status).toBe('succeeded');
    expect((await owner.getJob(ids.ids[1] as string))?.status).toBe('dead');
    expect((await owner.getJob(ids.ids[2] as string))?.status).toBe('pending');
  });

  it('LEASEHOLD_VIA_FUNCTIONS=1 routes a client that does not say (as `leasehold work` makes them)', async () => {
    const { id } = await owner.enqueue('legit-env', { e: 1 });
    process.env.LEASEHOLD_VIA_FUNCTIONS = '1';
    let lh: Leasehold;
    try {
      lh = await clientAs([schemaRole(owner.schema, 'worker')], owner.schema);
    } finally {
      delete process.env.LEASEHOLD_VIA_FUNCTIONS;
    }
    const [lease] = await lh.claim({ queue: 'legit-env', owner: 'w' });
    expect(lease).toMatchObject({ jobId: id, payload: { e: 1 } });
    expect(await lh.complete(lease as Lease)).toBe(true);
  });

  it('a producer enqueues plain, keyed, ordered and many', async () => {
    const plain = await producer.enqueue('legit-p', { p: 1 });
    const keyed = await producer.enqueue('legit-p', { p: 2 }, { idempotencyKey: 'k1' });
    expect(await producer.enqueue('legit-p', { p: 3 }, { idempotencyKey: 'k1' })).toEqual({
      id: keyed.id,
      created: false,
    });
    const ordered = await producer.enqueueMany('legit-p', [
      { payload: { o: 1 }, orderingKey: 'acct' },
      { payload: { o: 2 }, orderingKey: 'acct' },
    ]);
    const many = await producer.enqueueMany('legit-p', [{ payload: { m: 1 } }, { payload: { m: 2 } }]);
    const all = [plain.id, keyed.id, ...ordered.ids, ...many.ids];
    const { rows } = await ownerSql.query(
      `SELECT id::text, payload, awaits_predecessor FROM ${s}.jobs WHERE id = ANY($1) ORDER BY id`,
      [all],
    );
    expect(rows.map((row) => row.payload)).toEqual([
      { p: 1 },
      { p: 2 },
      { o: 1 },
      { o: 2 },
      { m: 1 },
      { m: 2 },
    ]);
    expect(rows.filter((row) => row.awaits_predecessor).map((row) => row.id)).toEqual([ordered.ids[1]]);
  });
});
