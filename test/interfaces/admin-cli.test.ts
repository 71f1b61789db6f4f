import { createServer } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCliInProcess } from '../support/cli-inprocess.js';
import { databaseUrl, migratedClient, testPool } from '../support/db.js';

// Commands run in this process, as the binary would run them (see support/cli-inprocess.ts).
const cli = runCliInProcess;

afterEach(() => vi.restoreAllMocks());

describe('admin CLI', () => {
  it('queues, pause and resume: a table by default, JSON on request', async () => {
    const lh = await migratedClient();
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    await lh.enqueueMany('emails', [{ payload: 1 }, { payload: 2 }]);
    await lh.configureQueue('emails', { owner: 'team-mail' });
    expect(await cli(['pause', 'emails', ...db])).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('paused'),
    });
    const table = await cli(['queues', ...db]);
    expect(table.code).toBe(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header).toMatch(/^queue\s+pending\s+running\s+dead\s+oldest\s+owner\s+state$/);
    expect(row).toMatch(/^emails\s+2\s+0\s+0\s+\S+\s+team-mail\s+paused$/);
    await cli(['resume', 'emails', ...db]);
    const json = JSON.parse((await cli(['queues', '--json', ...db])).stdout);
    expect(json).toEqual([
      expect.objectContaining({ name: 'emails', pending: 2, paused: false, owner: 'team-mail' }),
    ]);
  });

  it('dead list, replay by id and by filter, and jobs show', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const { ids } = await lh.enqueueMany(
      'reports',
      Array.from({ length: 5 }, (_, i) => ({ payload: { secret: `s${i}` }, maxAttempts: 1 })),
    );
    for (const lease of await lh.claim({ queue: 'reports', owner: 'w', limit: 5 })) {
      await lh.fail(lease, Object.assign(new Error('renderer crashed'), { code: 'RENDER' }));
    }
    const listed = await cli(['dead', 'list', '--queue', 'reports', '--limit', '3', ...db]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^id\s+queue\s+attempts\s+died\s+code\s+message/);
    expect(listed.stdout).toContain('RENDER');
    expect(listed.stdout).not.toContain('s0');
    const cursor = /more: --cursor (\S+)/.exec(listed.stdout)?.[1];
    expect(cursor).toBeDefined();
    const rest = JSON.parse(
      (await cli(['dead', 'list', '--queue', 'reports', '--cursor', cursor!, '--json', ...db])).stdout,
    );
    expect(rest.jobs).toHaveLength(2);

    const byId = await cli(['replay', ids[0]!, '--reason', 'fixed', '--actor', 'alice', '--json', ...db]);
    expect(JSON.parse(byId.stdout)).toEqual({ replayed: 1, ids: [ids[0]] });
    const byFilter = await cli([
      'replay',
      '--queue',
      'reports',
      '--error-code',
      'RENDER',
      '--reason',
      'fixed',
      ...db,
    ]);
    expect(byFilter).toMatchObject({ code: 0, stdout: 'replayed 4 job(s)\n' });

    const shown = await cli(['jobs', 'show', ids[0]!, ...db]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`job ${ids[0]} in queue reports: pending`);
    expect(shown.stdout).toMatch(/dead\s+1\s+w\s+1\s+RENDER; renderer crashed/);
    expect(shown.stdout).toMatch(/replayed\s+.*by alice; reason: fixed/);
    expect(shown.stdout).not.toContain('secret');
    const json = JSON.parse((await cli(['jobs', 'show', ids[0]!, '--json', ...db])).stdout);
    expect(json.history.map((e: { kind: string }) => e.kind)).toEqual([
      'enqueued',
      'claimed',
      'dead',
      'replayed',
    ]);
    expect(json).not.toHaveProperty('payload');
    const withPayload = JSON.parse(
      (await cli(['jobs', 'show', ids[0]!, '--json', '--payload', ...db])).stdout,
    );
    expect(withPayload.payload).toEqual({ secret: 's0' });
  });

  it('cancel and prune', async () => {
    const lh = await migratedClient();
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const { id } = await lh.enqueue('orders', {});
    expect(await cli(['cancel', id, '--reason', 'withdrawn', ...db])).toMatchObject({
      code: 0,
      stdout: `cancelled job ${id} (it was pending)\n`,
    });
    expect((await lh.getJob(id))?.status).toBe('cancelled');
    const again = await cli(['cancel', id, '--reason', 'twice', ...db]);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(
      `leasehold: cannot cancel: only pending or running jobs can be cancelled (${id} is cancelled); nothing was changed\n`,
    );
    const pruned = await cli(['prune', '--succeeded-retention', '0', '--json', ...db]);
    expect(JSON.parse(pruned.stdout)).toEqual({ succeeded: 0, terminal: 0, skipped: false });
  });

  it('bad input exits non-zero with a clear one-line message', async () => {
    const lh = await migratedClient();
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    const cases: [string[], RegExp][] = [
      [
        ['jobs', 'show', 'abc', ...db],
        /^leasehold: .*'abc' is invalid .* a job id is a positive whole number/,
      ],
      [
        ['replay', '7', 'x1', '--reason', 'r', ...db],
        /'x1' is invalid .* a job id is a positive whole number/,
      ],
      [['cancel', '0', '--reason', 'r', ...db], /'0' is invalid .* a job id is a positive whole number/],
      [['queues', '--bogus', ...db], /^leasehold: unknown option '--bogus'/],
      // cancel takes one job id: a queue is no target of it (docs/operators-guide.md, issue 38).
      [['cancel', '--queue', 'emials', '--reason', 'r', ...db], /^leasehold: unknown option '--queue'/],
      [['dashboard', '--json', ...db], /^leasehold: unknown option '--json'/],
      [['jobs', 'show', '424242', ...db], /^leasehold: no job 424242/],
      [['dead', 'list', '--limit', 'ten', ...db], /--limit <n>' argument 'ten' is invalid/],
      [['dead', 'list', '--before', 'yesterday', ...db], /expected an ISO 8601 time/],
      [['replay', '--reason', 'x', ...db], /^leasehold: give job ids or a filter/],
      [['replay', '1', '--queue', 'q', '--reason', 'x', ...db], /^leasehold: give job ids or a filter/],
      [['cancel', '1', ...db], /^leasehold: required option '--reason <text>' not specified/],
      [['pause', 'bad queue!', ...db], /^leasehold: queue: must be 1 to 128 characters/],
      [
        ['queues', '--database-url', 'mysql://x/y'],
        /^leasehold: --database-url: expected a postgres:\/\/ URL/,
      ],
    ];
    for (const [args, message] of cases) {
      const result = await cli(args);
      expect(result.code, args.join(' ')).not.toBe(0);
      expect(result.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
      expect(result.stderr, args.join(' ')).toMatch(message);
    }
    // No statement names, no driver jargon: what is wrong and what to do.
    const missing = `${lh.schema}_never_migrated`;
    for (const args of [['queues'], ['dead', 'list'], ['jobs', 'show', '1'], ['dashboard'], ['metrics']]) {
      const result = await cli([...args, '--database-url', databaseUrl(), '--schema', missing]);
      expect(result.code, args.join(' ')).toBe(1);
      expect(result.stderr, args.join(' ')).toBe(
        `leasehold: schema ${missing} is not migrated (it holds no Leasehold tables): run \`leasehold migrate --schema ${missing}\` against this database, or pass the --schema (or LEASEHOLD_SCHEMA) your application uses\n`,
      );
    }
    const unreachable = await cli(['queues', '--database-url', 'postgres://postgres@127.0.0.1:1/postgres']);
    expect(unreachable.stderr).toMatch(
      /^leasehold: cannot use the database \(.*ECONNREFUSED.*\): check --database-url or DATABASE_URL\n$/,
    );
    expect(unreachable.stderr).not.toMatch(/leasehold_[a-z_]+_[0-9a-f]{10}/);
    const saved = process.env.DATABASE_URL;
    delete process.env.DATABASE_URL;
    try {
      expect((await cli(['queues'])).stderr).toBe(
        'leasehold: no database: give --database-url or set DATABASE_URL\n',
      );
    } finally {
      if (saved !== undefined) process.env.DATABASE_URL = saved;
    }
  });

  it('reads the schema from LEASEHOLD_SCHEMA, and says --reason is required', async () => {
    const lh = await migratedClient();
    await lh.enqueue('from-env', {});
    process.env.LEASEHOLD_SCHEMA = lh.schema;
    try {
      const listed = await cli(['queues', '--json', '--database-url', databaseUrl()]);
      expect(listed.code).toBe(0);
      expect(JSON.parse(listed.stdout).map((q: { name: string }) => q.name)).toEqual(['from-env']);
    } finally {
      delete process.env.LEASEHOLD_SCHEMA;
    }
    for (const command of ['cancel', 'replay']) {
      expect((await cli([command, '--help'])).stdout).toMatch(/--reason <text> +why \(required;/);
    }
  });

  it('every command has help with examples', async () => {
    for (const args of [
      ['jobs', 'show'],
      ['dead', 'list'],
      ['replay'],
      ['cancel'],
      ['queues'],
      ['pause'],
      ['resume'],
      ['prune'],
    ]) {
      const help = await cli([...args, '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout, args.join(' ')).toContain('Examples:');
      expect(help.stdout, args.join(' ')).toContain('--database-url');
      expect(help.stdout, args.join(' ')).toContain('--json');
    }
  });

  it('a server that drops the connection at once gets the one clear connection-failure line', async () => {
    // What an unroutable address or a proxy with nothing behind it does: the TCP connection is
    // made, then ended before the server says anything ("Connection terminated unexpectedly").
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const dropping = ['--database-url', `postgres://postgres@127.0.0.1:${port}/postgres`];
    // A role the server does not know: refused at login (SQLSTATE 28000), the same shape.
    const unknownRole = new URL(databaseUrl());
    unknownRole.username = 'lh_no_such_role';
    try {
      // Every command that reaches the database, not only `queues`.
      for (const args of [
        ['queues'],
        ['dead', 'list'],
        ['jobs', 'show', '1'],
        ['pause', 'emails'],
        ['replay', '--queue', 'emails', '--reason', 'r'],
        ['cancel', '1', '--reason', 'r'],
        ['check', '--max-dead', '0'],
        ['metrics', '--json'],
        ['prune'],
        ['schedules', 'list'],
        ['migrate'],
      ]) {
        const result = await cli([...args, ...dropping]);
        expect(result.code, args.join(' ')).toBe(1);
        expect(result.stderr, args.join(' ')).toMatch(
          /^leasehold: cannot use the database \(Connection terminated unexpectedly\): check --database-url or DATABASE_URL\n$/,
        );
      }
      const refused = await cli(['queues', '--database-url', unknownRole.toString()]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        /^leasehold: cannot use the database \(.*lh_no_such_role.*\): check --database-url or DATABASE_URL\n$/,
      );
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('pause, resume, replay --queue and dead list --queue refuse a queue that does not exist, naming the closest', async () => {
    const lh = await migratedClient();
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    await lh.enqueue('emails', { n: 1 });
    for (const args of [
      ['pause', 'emials'],
      ['resume', 'emials'],
      ['replay', '--queue', 'emials', '--reason', 'typo'],
      ['dead', 'list', '--queue', 'emials'],
    ]) {
      const result = await cli([...args, ...db]);
      expect(result.code, args.join(' ')).toBe(1);
      expect(result.stdout, args.join(' ')).toBe('');
      expect(result.stderr, args.join(' ')).toBe('leasehold: no queue "emials" (did you mean "emails"?)\n');
    }
    // No phantom queue was left behind, and the real one was not paused.
    expect(JSON.parse((await cli(['queues', '--json', ...db])).stdout)).toEqual([
      expect.objectContaining({ name: 'emails', paused: false }),
    ]);
    // --create pauses a queue before its first job.
    expect(await cli(['pause', 'invoices', '--create', ...db])).toMatchObject({
      code: 0,
      stdout: 'queue invoices paused: no new claims until `leasehold resume invoices`\n',
    });
    expect(await cli(['resume', 'invoices', ...db])).toMatchObject({ code: 0 });
  });

  it('a drained queue stays in `leasehold queues` and `metrics --json`, with its completions in the window', async () => {
    const lh = await migratedClient();
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    await lh.enqueueMany('thumbnails', [{ payload: 1 }, { payload: 2 }]);
    for (const lease of await lh.claim({ queue: 'thumbnails', owner: 'w', limit: 10 })) {
      expect(await lh.complete(lease)).toBe(true);
    }
    // Idle and well: no pending, running or dead job. At 042ed35 the queue left both listings.
    const table = await cli(['queues', ...db]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.trim().split('\n')[1]).toMatch(/^thumbnails\s+0\s+0\s+0\s/);
    const metrics = await cli(['metrics', '--json', ...db]);
    expect(metrics.code, metrics.stderr).toBe(0);
    expect(JSON.parse(metrics.stdout).queues).toEqual([
      expect.objectContaining({ queue: 'thumbnails', pending: 0, running: 0, dead: 0, completedInWindow: 2 }),
    ]);
  });

  it('metrics --json prints the gauges once as JSON; check takes and prints durations as queues does and asks for a number ≥ 0', async () => {
    const lh = await migratedClient();
    const db = ['--database-url', databaseUrl(), '--schema', lh.schema];
    await lh.enqueue('gauged', {});
    const metrics = await cli(['metrics', '--json', ...db]);
    expect(metrics.code).toBe(0);
    const snapshot = JSON.parse(metrics.stdout);
    expect(snapshot.queues).toEqual([expect.objectContaining({ queue: 'gauged', pending: 1 })]);
    const negative = await cli(['check', '--max-dead', '-3', ...db]);
    expect(negative.code).not.toBe(0);
    expect(negative.stderr).toMatch(/expected a whole number ≥ 0/);
    // A job claimable for two days and more: both commands print its age as "2d 1h".
    const pool = testPool(1);
    await pool.query(`UPDATE "${lh.schema}".jobs SET available_at = now() - interval '49 hours 10 minutes'`);
    const queues = await cli(['queues', ...db]);
    expect(queues.stdout).toMatch(/gauged\s+1\s+0\s+0\s+2d 1h\s/);
    const check = await cli(['check', '--max-oldest-age', '1d 12h', ...db]);
    expect(check.code).toBe(1);
    expect(check.stdout).toBe(
      'FAIL maxOldestAgeMs: queue gauged: oldest claimable job has waited 2d 1h (limit 1d 12h)\n',
    );
  });
});
