import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isLeaseholdError, Leasehold, ValidationError } from '../../src/index.js';
import { countByStatus, databaseUrl, directDatabaseUrl, migratedClient, testPool } from '../support/db.js';

describe('enqueue', () => {
  it("commits with the caller's transaction", async () => {
    const lh = await migratedClient();
    const client = new pg.Client({ connectionString: databaseUrl() });
    await client.connect();
    try {
      await client.query('BEGIN');
      const { id } = await lh.enqueue('tx', { order: 7 }, { client });
      // Not visible outside the transaction until it commits.
      expect(await lh.getJob(id)).toBeNull();
      await client.query('COMMIT');
      expect(await lh.getJob(id)).toMatchObject({
        status: 'pending',
        payload: { order: 7 },
        queueName: 'tx',
      });
    } finally {
      await client.end();
    }
  });

  it("disappears when the caller's transaction rolls back", async () => {
    const lh = await migratedClient();
    const client = new pg.Client({ connectionString: databaseUrl() });
    await client.connect();
    try {
      await client.query('BEGIN');
      const { id } = await lh.enqueue('tx', { order: 8 }, { client });
      const many = await lh.enqueueMany('tx', [{ payload: 1 }, { payload: 2 }], { client });
      await client.query('ROLLBACK');
      expect(await lh.getJob(id)).toBeNull();
      for (const other of many.ids) expect(await lh.getJob(other)).toBeNull();
    } finally {
      await client.end();
    }
  });

  it('enqueueMany inserts every job in one statement and returns ids in input order', async () => {
    const lh = await migratedClient();
    const items = Array.from({ length: 500 }, (_, i) => ({
      payload: { i, text: `quote " and backslash \\ ${i}` },
      priority: i % 3,
      maxAttempts: 1 + (i % 4),
    }));
    const { ids } = await lh.enqueueMany('many', items);
    expect(ids).toHaveLength(500);
    for (const index of [0, 1, 250, 499]) {
      const job = await lh.getJob(ids[index]!);
      expect(job).toMatchObject({
        payload: items[index]!.payload,
        priority: items[index]!.priority,
        maxAttempts: items[index]!.maxAttempts,
      });
    }
  });

  it('enqueueMany sends a uniform batch as payloads only, with its one priority and attempt budget', async () => {
    const setup = await migratedClient();
    const names: string[] = [];
    class RecordingPool extends pg.Pool {
      override query(config: unknown, values?: unknown): never {
        const name = (config as { name?: string } | undefined)?.name;
        if (name?.startsWith('leasehold_enqueue_many')) names.push(name);
        return (super.query as (c: unknown, v?: unknown) => never)(config, values);
      }
    }
    const pool = new RecordingPool({ connectionString: databaseUrl(), max: 2 });
    const lh = new Leasehold({ pool, schema: setup.schema });
    try {
      const uniform = await lh.enqueueMany(
        'uniform',
        [1, 2, 3].map((n) => ({ payload: { n }, priority: 5, maxAttempts: 2 })),
      );
      expect(names).toHaveLength(1);
      expect(names[0]).toMatch(/^leasehold_enqueue_many_uniform_/);
      for (const [i, id] of uniform.ids.entries()) {
        expect(await lh.getJob(id)).toMatchObject({ payload: { n: i + 1 }, priority: 5, maxAttempts: 2 });
      }
      // One job delayed: the batch is not uniform, and each job keeps its own values.
      names.length = 0;
      const mixed = await lh.enqueueMany('uniform', [
        { payload: 'now' },
        { payload: 'later', delayMs: 60_000 },
      ]);
      expect(names).toHaveLength(1);
      expect(names[0]).not.toMatch(/uniform/);
      const [now, later] = await Promise.all(mixed.ids.map((id) => lh.getJob(id)));
      expect(later!.availableAt.getTime() - now!.availableAt.getTime()).toBeGreaterThan(50_000);
    } finally {
      await lh.close();
      await pool.end();
    }
  });

  it('a uniform batch gives each job its own identity, drawn by the producer, in the lane its default names', async () => {
    const setup = await migratedClient();
    const sent: unknown[][] = [];
    class RecordingPool extends pg.Pool {
      override query(config: unknown, values?: unknown): never {
        const c = config as { name?: string; values?: unknown[] } | undefined;
        if (c?.name?.startsWith('leasehold_enqueue_many_uniform')) sent.push(c.values ?? []);
        return (super.query as (c: unknown, v?: unknown) => never)(config, values);
      }
    }
    const pool = new RecordingPool({ connectionString: databaseUrl(), max: 2 });
    const lh = new Leasehold({ pool, schema: setup.schema });
    try {
      const { ids } = await lh.enqueueMany(
        'uniform-uid',
        Array.from({ length: 300 }, (_, n) => ({ payload: { n } })),
      );
      expect(sent).toHaveLength(1);
      const { rows } = await setup.pool.query(
        `SELECT j.id::text AS id, j.job_uid::text AS uid, j.lane = "${setup.schema}".job_lane_at(j.created_at) AS default_lane
         FROM "${setup.schema}".jobs AS j WHERE j.id = ANY ($1::bigint[]) ORDER BY j.id`,
        [ids],
      );
      expect(rows.map((r) => r.id)).toEqual(ids);
      // Every job has a uid of its own, and it is the one the producer sent for its position.
      const uids = rows.map((r) => r.uid);
      expect(new Set(uids).size).toBe(300);
      expect(String(sent[0]?.[5])).toBe(`{${uids.join(',')}}`);
      // The lane named once per statement is the lane the column's default gives each row.
      expect(rows.every((r) => r.default_lane)).toBe(true);
    } finally {
      await lh.close();
      await pool.end();
    }
  });

  it('enqueueMany is all or nothing', async () => {
    const lh = await migratedClient();
    const pool = testPool();
    await expect(
      lh.enqueueMany('atomic', [{ payload: 1 }, { payload: 2, maxAttempts: 0 }]),
    ).rejects.toBeInstanceOf(ValidationError);
    expect(await countByStatus(pool, lh.schema)).toEqual({});
  });

  it('notifies listeners of the queue in the same transaction, with only the queue name', async () => {
    const lh = await migratedClient();
    // LISTEN needs a session of its own: behind a pooler, a direct connection.
    const listener = new pg.Client({ connectionString: directDatabaseUrl() });
    await listener.connect();
    try {
      const received: { channel: string; payload: string | undefined }[] = [];
      listener.on('notification', (m) => received.push({ channel: m.channel, payload: m.payload }));
      await listener.query(`LISTEN "${lh.schema}_wakeup"`);
      const tx = new pg.Client({ connectionString: databaseUrl() });
      await tx.connect();
      await tx.query('BEGIN');
      await lh.enqueue('notified', { secret: 'never in a notification' }, { client: tx });
      await lh.enqueue('notified', { secret: 'twice' }, { client: tx });
      await lh.enqueueMany('notified', [{ payload: 1 }, { payload: 2 }], { client: tx });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(received).toEqual([]);
      await tx.query('COMMIT');
      await tx.end();
      for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      // One transaction wakes a queue once, and the notification carries no job data.
      expect(received).toEqual([{ channel: `${lh.schema}_wakeup`, payload: 'notified' }]);
    } finally {
      await listener.end();
    }
  });
});

describe('validation', () => {
  const bad: [string, (lh: Leasehold) => Promise<unknown>][] = [
    ['a queue name with a space', (lh) => lh.enqueue('bad queue', {})],
    ['a queue name with a quote', (lh) => lh.enqueue(`x'; DROP TABLE jobs; --`, {})],
    ['a queue name over 128 characters', (lh) => lh.enqueue('q'.repeat(129), {})],
    ['an empty queue name', (lh) => lh.enqueue('', {})],
    ['a payload that cannot be JSON', (lh) => lh.enqueue('q', { n: 1n })],
    [
      'a circular payload',
      (lh) => {
        const circular: Record<string, unknown> = {};
        circular.self = circular;
        return lh.enqueue('q', circular);
      },
    ],
    ['an undefined payload', (lh) => lh.enqueue('q', undefined)],
    ['a payload over maxPayloadBytes', (lh) => lh.enqueue('q', { blob: 'x'.repeat(2048) })],
    ['maxAttempts below 1', (lh) => lh.enqueue('q', {}, { maxAttempts: 0 })],
    ['a fractional priority', (lh) => lh.enqueue('q', {}, { priority: 1.5 })],
    ['a negative delay', (lh) => lh.enqueue('q', {}, { delayMs: -1 })],
    ['an invalid runAt', (lh) => lh.enqueue('q', {}, { runAt: new Date('nope') })],
    ['an empty enqueueMany', (lh) => lh.enqueueMany('q', [])],
    ['a bad item in enqueueMany', (lh) => lh.enqueueMany('q', [{ payload: 1 }, { payload: () => 1 }])],
    ['a claim limit of 0', (lh) => lh.claim({ queue: 'q', owner: 'w', limit: 0 })],
    ['a claim limit over 1000', (lh) => lh.claim({ queue: 'q', owner: 'w', limit: 1001 })],
    ['a lease of 0', (lh) => lh.claim({ queue: 'q', owner: 'w', leaseMs: 0 })],
    ['a negative lease', (lh) => lh.claim({ queue: 'q', owner: 'w', leaseMs: -5 })],
    ['a claim without an owner', (lh) => lh.claim({ queue: 'q', owner: '' })],
    [
      'a heartbeat lease of 0',
      (lh) =>
        lh.heartbeat(
          {
            jobId: '1',
            queue: 'q',
            payload: null,
            owner: 'w',
            token: '1',
            claimId: '1',
            attempt: 1,
            maxAttempts: 1,
            expiresAt: new Date(),
          },
          { leaseMs: 0 },
        ),
    ],
    [
      'a lease with a forged id',
      (lh) =>
        lh.complete({
          jobId: '1 OR 1=1',
          queue: 'q',
          payload: null,
          owner: 'w',
          token: '1',
          claimId: '1',
          attempt: 1,
          maxAttempts: 1,
          expiresAt: new Date(),
        }),
    ],
    [
      'a lease with a forged claim id',
      (lh) =>
        lh.complete({
          jobId: '1',
          queue: 'q',
          payload: null,
          owner: 'w',
          token: '1',
          claimId: "1'; DROP TABLE jobs; --",
          attempt: 1,
          maxAttempts: 1,
          expiresAt: new Date(),
        }),
    ],
  ];

  it.each(bad)('refuses %s with a ValidationError and writes nothing', async (_name, call) => {
    const lh = await migratedClient({ maxPayloadBytes: 1024 });
    const pool = testPool(2);
    const promise = call(lh);
    // Async methods reject; they never throw synchronously.
    expect(promise).toBeInstanceOf(Promise);
    const err = await promise.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ValidationError);
    expect(isLeaseholdError(err, 'VALIDATION')).toBe(true);
    expect(await countByStatus(pool, lh.schema)).toEqual({});
  });

  it('refuses a bad schema name in the constructor', () => {
    for (const schema of ['Bad', 'has space', 'x"; DROP SCHEMA public; --', '', '1abc', 'a'.repeat(41)]) {
      expect(() => new Leasehold({ connectionString: databaseUrl(), schema })).toThrow(ValidationError);
    }
  });

  it('suggests the fix in a validation message', async () => {
    const lh = await migratedClient();
    await expect(lh.enqueue('q', {}, { maxAttempts: 0 })).rejects.toThrow(
      /maxAttempts: must be an integer from 1 to 1000/,
    );
  });
});
