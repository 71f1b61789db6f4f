import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerModuleFrom } from '../../src/cli/worker-module.js';
import { buildReport, formatReport, type ReportInput, type WorkerSummary } from '../../src/demo/report.js';
import { type ChildEnd, watchOutput } from '../support/child-output.js';
import { buildPrivateCli } from '../support/cli-build.js';
import { databaseUrl, migratedClient, testPool, uniqueSchema, waitFor } from '../support/db.js';

// The CLI runs from a private build (see support/cli-build.ts), with worker modules beside it.
let buildDir = '';
let bin = '';
let modulesDir = '';
let removeBuild = () => {};

beforeAll(async () => {
  const build = await buildPrivateCli('cli-test');
  ({ buildDir, bin } = build);
  removeBuild = build.remove;
  modulesDir = `${buildDir}/modules`;
  mkdirSync(modulesDir, { recursive: true });
}, 120_000);

afterAll(() => {
  removeBuild();
});

type Finished = ChildEnd;

/** A running `leasehold` process, its output collected as it comes. */
interface RunningCli {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<Finished>;
}

/** Starts the compiled binary. DATABASE_URL is unset unless given, so no test uses it by accident. */
function startCli(args: string[], env: Record<string, string> = {}): RunningCli {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: modulesDir,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = watchOutput(child, `leasehold ${args.join(' ')}`);
  return { child, stdout: output.stdout, stderr: output.stderr, exited: output.exited };
}

/** Runs the binary to its end, killing it if it outlives `timeoutMs`. */
async function runCli(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 30_000,
): Promise<Finished> {
  const run = startCli(args, env);
  const timer = setTimeout(() => run.child.kill('SIGKILL'), timeoutMs);
  try {
    return await run.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Writes a worker module for `leasehold work` and returns its path relative to the CLI's cwd. */
function writeModule(source: string): string {
  const name = `module-${randomBytes(4).toString('hex')}.mjs`;
  writeFileSync(`${modulesDir}/${name}`, source);
  return `./${name}`;
}

/** Fails on anything that looks like a stack trace, and on more than one line. */
function expectOneLineError(stderr: string, pattern: RegExp): void {
  expect(stderr).not.toMatch(/\n\s+at /);
  expect(stderr.trim().split('\n')).toHaveLength(1);
  expect(stderr.trim()).toMatch(pattern);
}

let pool: pg.Pool | null = null;

async function schemaExists(schema: string): Promise<boolean> {
  pool ??= testPool(1);
  const { rows } = await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  return rows.length > 0;
}

describe('leasehold migrate', () => {
  it('creates the schema, then finds it up to date, in text and in JSON', async () => {
    const schema = uniqueSchema('lh_cli');
    const first = await runCli(['migrate', '--database-url', databaseUrl(), '--schema', schema]);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(
      new RegExp(`^schema ${schema} is at version (\\d+) \\(applied 1(, \\d+)*\\)\\n$`),
    );
    // The tables exist: a client on that schema can enqueue without migrating.
    const lh = await migratedClient({ schema });
    expect((await lh.enqueue('after-cli-migrate', { ok: true })).id).toMatch(/^\d+$/);

    const again = await runCli(['migrate', '--json', '--schema', schema], { DATABASE_URL: databaseUrl() });
    expect(again.code).toBe(0);
    const json = JSON.parse(again.stdout);
    expect(json).toEqual({ schema, version: expect.any(Number), applied: [] });
    expect(first.stdout).toContain(`at version ${json.version} `);
  });

  it('without a database URL, refuses to start (work and migrate), naming the way out', async () => {
    for (const args of [['migrate'], ['work', writeModule('export const emails = async () => {};\n')]]) {
      const result = await runCli(args);
      expect(result.code, args[0]).toBe(1);
      expectOneLineError(
        result.stderr,
        /^leasehold: no database: give --database-url or set DATABASE_URL \(or --embedded for a throwaway PostgreSQL/,
      );
    }
    const both = await runCli(['migrate', '--embedded', '--database-url', databaseUrl()]);
    expectOneLineError(both.stderr, /^leasehold: give --database-url or --embedded, not both$/);
  });

  it('with --embedded, starts an embedded PostgreSQL, says so, and stops it on exit', async () => {
    const schema = uniqueSchema('lh_cli');
    const result = await runCli(['migrate', '--embedded', '--schema', schema], {}, 60_000);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/starting an embedded PostgreSQL/);
    const port = Number(/embedded PostgreSQL ready on 127\.0\.0\.1:(\d+)/.exec(result.stderr)?.[1]);
    expect(port).toBeGreaterThan(0);
    expect(result.stdout).toMatch(new RegExp(`^schema ${schema} is at version \\d+`));
    const client = new pg.Client({
      connectionString: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    });
    client.on('error', () => {});
    await expect(client.connect()).rejects.toThrow(/ECONNREFUSED/);
  }, 90_000);
});

describe('bad input exits non-zero with one clear line', () => {
  it('refuses a bad schema name before starting any database', async () => {
    const result = await runCli(['migrate', '--schema', 'Not-Valid']);
    expect(result.code).toBe(1);
    expectOneLineError(result.stderr, /^leasehold: schema: must start with a lower-case letter/);
  });

  it('refuses a database URL that is not a postgres URL, without echoing it', async () => {
    const result = await runCli(['migrate', '--database-url', 'mysql://root:hunter2@db/app']);
    expect(result.code).toBe(1);
    expectOneLineError(result.stderr, /^leasehold: --database-url: expected a postgres:\/\/ URL/);
    expect(result.stderr).not.toContain('hunter2');
  });

  it('reports an unreachable server in one line', async () => {
    const result = await runCli(['migrate', '--database-url', 'postgres://postgres@127.0.0.1:1/postgres']);
    expect(result.code).toBe(1);
    expectOneLineError(
      result.stderr,
      /^leasehold: cannot use the database \(.*ECONNREFUSED.*\): check --database-url/,
    );
  });

  it('rejects unknown options and missing arguments', async () => {
    const unknown = await runCli(['migrate', '--shema', 'x']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/unknown option '--shema'/);
    const missing = await runCli(['work']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/missing required argument 'module'/);
    const jobs = await runCli(['demo', '--jobs', 'many']);
    expect(jobs.code).toBe(1);
    expect(jobs.stderr).toMatch(/--jobs.*expected an integer from 300/);
  });

  it('reports a missing worker module, a non-queue export and a mistyped option', async () => {
    const missing = await runCli(['work', './no-such-module.mjs']);
    expect(missing.code).toBe(1);
    expectOneLineError(missing.stderr, /^leasehold: worker module not found: .*no-such-module\.mjs$/);

    const notQueue = await runCli(['work', writeModule('export const emails = 42;\n')]);
    expect(notQueue.code).toBe(1);
    expectOneLineError(notQueue.stderr, /export "emails" is not a queue/);

    const typo = await runCli([
      'work',
      writeModule('export const emails = { handler: async () => {}, concurency: 2 };\n'),
    ]);
    expect(typo.code).toBe(1);
    expectOneLineError(
      typo.stderr,
      /queues\.emails\.concurency: is not an option \(did you mean concurrency\?\)/,
    );
    // Validation came first: no embedded server was started for input that could never run.
    expect(typo.stderr).not.toMatch(/embedded/);
  });

  it('reports a module that fails to load in one line', async () => {
    const result = await runCli(['work', writeModule('throw new Error("boom at import");\n')]);
    expect(result.code).toBe(1);
    expectOneLineError(result.stderr, /could not load worker module .*: boom at import/);
  });
});

describe('--help', () => {
  it.each(['migrate', 'work', 'demo'])('%s --help describes the command with an example', async (command) => {
    const result = await runCli([command, '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^Usage: leasehold ${command}`));
    expect(result.stdout).toMatch(/Examples?:\n\s+\$ (DATABASE_URL=\S+ )?leasehold /);
  });
});

describe('worker modules', () => {
  const handler = async () => {};

  it('reads handlers and option objects as queues, and `options` or `default` as worker options', () => {
    const queue = { handler, concurrency: 2 };
    expect(
      workerModuleFrom({ emails: handler, thumbs: queue, options: { pollIntervalMs: 50 } }, 'm'),
    ).toEqual({
      queues: { emails: handler, thumbs: queue },
      tasks: [],
      options: { pollIntervalMs: 50 },
    });
    expect(workerModuleFrom({ emails: handler, default: { listen: false } }, 'm').options).toEqual({
      listen: false,
    });
    expect(workerModuleFrom({ emails: handler }, 'm').options).toEqual({});
  });

  it('refuses ambiguous or empty modules', () => {
    expect(() => workerModuleFrom({ emails: handler, default: {}, options: {} }, 'm')).toThrow(/not both/);
    expect(() => workerModuleFrom({ options: {} }, 'm')).toThrow(/exports no queues/);
    expect(() => workerModuleFrom({ emails: handler, options: { queues: {} } }, 'm')).toThrow(
      /must not hold "queues"/,
    );
    expect(() => workerModuleFrom({ emails: { concurrency: 1 } }, 'm')).toThrow(/"emails" is not a queue/);
  });
});

describe('leasehold work', () => {
  it('runs the exported handlers, logs counters but never payloads, and exits 0 on SIGTERM', async () => {
    const lh = await migratedClient();
    const module = writeModule(`
      export const emails = async (job) => { if (typeof job.payload.secret !== 'string') throw new Error('no payload'); };
      export const thumbnails = { handler: async () => {}, concurrency: 2, leaseMs: 5000 };
      export const options = { pollIntervalMs: 50 };
    `);
    const { ids: emailIds } = await lh.enqueueMany(
      'emails',
      Array.from({ length: 20 }, (_, i) => ({ payload: { secret: `payload-secret-${i}` } })),
    );
    const { ids: thumbIds } = await lh.enqueueMany('thumbnails', [{ payload: {} }, { payload: {} }]);
    const run = startCli(['work', module, '--schema', lh.schema], { DATABASE_URL: databaseUrl() });
    try {
      for (const id of [...emailIds, ...thumbIds]) {
        await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: `job ${id}` });
      }
      await waitFor(() => run.stderr().includes('completed=22'), { what: 'the counters line' });
      run.child.kill('SIGTERM');
      const result = await run.exited;
      expect(result.code).toBe(0);
      expect(result.stderr).toMatch(/started on emails, thumbnails/);
      expect(result.stderr).toMatch(/SIGTERM: stopping/);
      expect(result.stderr).toMatch(/stopped: claimed=22 completed=22 /);
      expect(result.stderr).not.toContain('payload-secret');
    } finally {
      run.child.kill('SIGKILL');
    }
  });

  it('the stop summary counts runs handed back at the shutdown timeout, and no longer as running', async () => {
    const lh = await migratedClient();
    const module = writeModule(`
      // Ignores its signal: still running when the shutdown timeout passes.
      export const stubborn = { handler: () => new Promise(() => {}), concurrency: 3 };
      export const options = { shutdownTimeoutMs: 200, pollIntervalMs: 50 };
    `);
    const { ids } = await lh.enqueueMany('stubborn', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    const run = startCli(['work', module, '--schema', lh.schema], { DATABASE_URL: databaseUrl() });
    try {
      for (const id of ids) {
        await waitFor(async () => (await lh.getJob(id))?.status === 'running', {
          what: `job ${id} to start`,
        });
      }
      run.child.kill('SIGTERM');
      const result = await run.exited;
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toMatch(/stopped: claimed=3 completed=0 .*handedBack=3 running=0\n/);
      // Handed back indeed: pending again, the attempt refunded.
      for (const id of ids) expect(await lh.getJob(id)).toMatchObject({ status: 'pending', attemptCount: 0 });
    } finally {
      run.child.kill('SIGKILL');
    }
  });

  it("docs/cli.md's start script under a supervisor gets the graceful stop on SIGTERM", async () => {
    const lh = await migratedClient();
    // The installed binary, where npm puts it, and the start script exactly as the docs show it.
    mkdirSync(`${modulesDir}/node_modules/.bin`, { recursive: true });
    const link = `${modulesDir}/node_modules/.bin/leasehold`;
    if (!existsSync(link)) symlinkSync(bin, link);
    chmodSync(bin, 0o755);
    const docs = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8');
    const script =
      /```sh\n(#!\/bin\/sh\nexec \.\/node_modules\/\.bin\/leasehold work \.\/handlers\.js\n)```/.exec(
        docs,
      )?.[1];
    expect(script, 'the start script in docs/cli.md').toBeDefined();
    writeFileSync(`${modulesDir}/start.sh`, script ?? '');
    writeFileSync(
      `${modulesDir}/handlers.js`,
      `export const slow = async () => { process.stderr.write('handler started\\n'); await new Promise((resolve) => setTimeout(resolve, 1000)); };\n`,
    );
    const { id } = await lh.enqueue('slow', {});
    const { DATABASE_URL: _ignored, ...inherited } = process.env;
    const child = spawn('sh', ['start.sh'], {
      cwd: modulesDir,
      env: { ...inherited, DATABASE_URL: databaseUrl(), LEASEHOLD_SCHEMA: lh.schema },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      // The handler's own word, not the row's status: a claimed job may still wait in the worker's
      // read-ahead, and a stop hands such a job back rather than running it.
      await waitFor(() => stderr.includes('handler started'), { what: 'the handler to start' });
      expect((await lh.getJob(id))?.status).toBe('running');
      child.kill('SIGTERM'); // what the supervisor does: to the process it started
      const code = await exited;
      expect(code, stderr).toBe(0);
      expect(stderr).toMatch(/SIGTERM: stopping/);
      expect(stderr).toMatch(/stopped: claimed=1 completed=1 /);
      // The stop completed before the process ended: the running job finished and was recorded.
      expect((await lh.getJob(id))?.status).toBe('succeeded');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('on SIGINT lets a running job finish before exiting 0', async () => {
    const lh = await migratedClient();
    const module = writeModule(`
      export const slow = async () => {
        process.stderr.write('handler started\\n');
        await new Promise((resolve) => setTimeout(resolve, 1500));
      };
    `);
    const { id } = await lh.enqueue('slow', {});
    const run = startCli(['work', module, '--schema', lh.schema], { DATABASE_URL: databaseUrl() });
    try {
      // Started by its handler, not only claimed (a claimed job waiting in the read-ahead is handed
      // back at stop, which is right, and is not what this test is about).
      await waitFor(() => run.stderr().includes('handler started'), { what: 'the handler to start' });
      expect((await lh.getJob(id))?.status).toBe('running');
      run.child.kill('SIGINT');
      const result = await run.exited;
      expect(result.code).toBe(0);
      // Not aborted and handed back: the handler ran to its end and its completion was written.
      expect((await lh.getJob(id))?.status).toBe('succeeded');
    } finally {
      run.child.kill('SIGKILL');
    }
  });
});

describe('the demo', () => {
  it('loses no job although one worker is killed and one paused past its lease, and drops its schema', async () => {
    const result = await runCli(
      ['demo', '--jobs', '600', '--json', '--timeout', '60'],
      { DATABASE_URL: databaseUrl() },
      75_000,
    );
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report).toMatchObject({ ok: true, jobs: 600, succeeded: 600, dead: 0, missing: 0, problems: [] });
    expect(report.queues.map((q: { queue: string }) => q.queue)).toEqual([
      'emails',
      'thumbnails',
      'webhooks',
    ]);
    // Planned failures were retried.
    expect(report.retries).toBeGreaterThan(0);
    // Worker 2 was killed while handlers ran: the survivors' sweeps recovered its leases.
    expect(report.workers.map((w: { fate: string }) => w.fate)).toEqual(['stopped', 'killed', 'stopped']);
    expect(report.recovered).toBeGreaterThan(0);
    // Worker 3's late outcomes were refused by the fence or dropped by its own deadline check.
    expect(report.refusedWrites + report.droppedLocally).toBeGreaterThan(0);
    expect(report.duplicates.unexplained).toBe(0);
    // The scenario's events were shown (stderr is not a terminal: plain lines, no bar).
    expect(result.stderr).toMatch(/killed worker 2 \(SIGKILL\)/);
    expect(result.stderr).toMatch(/paused worker 3/);
    expect(result.stderr).toMatch(/resumed worker 3/);
    // The story does not run ahead of the numbers: which way the late writes go is counted, not told.
    expect(result.stderr).not.toMatch(/meet the fence/);
    expect(result.stderr).toMatch(/600\/600 jobs finished/);
    expect(await schemaExists(report.schema)).toBe(false);
  }, 90_000);

  it('on SIGINT stops its worker processes, drops its schema and exits 130', async () => {
    const run = startCli(['demo', '--jobs', '3000'], { DATABASE_URL: databaseUrl() });
    try {
      await waitFor(() => run.stderr().includes('started 3 worker processes'), {
        timeoutMs: 30_000,
        what: 'the workers to start',
      });
      const schema = /in schema (leasehold_demo_[0-9a-f]+)/.exec(run.stderr())?.[1] as string;
      expect(await schemaExists(schema)).toBe(true);
      run.child.kill('SIGINT');
      const result = await run.exited;
      expect(result.code).toBe(130);
      expect(result.stderr).toMatch(/leasehold: interrupted by SIGINT/);
      expect(await schemaExists(schema)).toBe(false);
      const workers = await promisify(execFile)('ps', ['-eo', 'args']);
      expect(workers.stdout).not.toContain(`${buildDir}/dist/demo/worker-process.js`);
    } finally {
      run.child.kill('SIGKILL');
    }
  }, 60_000);
});

describe('the demo verdict', () => {
  const input = (queue: Partial<ReportInput['queues'][number]>): ReportInput => ({
    schema: 'leasehold_demo_00000000',
    jobs: 10,
    queues: [
      {
        queue: 'emails',
        total: 10,
        succeeded: 10,
        dead: 0,
        pending: 0,
        running: 0,
        missing: 0,
        other: 0,
        retries: 0,
        ...queue,
      },
    ],
    refusals: [],
    duplicates: { jobs: 0, extraRuns: 0, unexplained: 0 },
    elapsedMs: 1000,
    workers: [],
  });

  it('passes only when every job succeeded', () => {
    expect(buildReport(input({})).ok).toBe(true);
    const lost = buildReport(input({ succeeded: 9, missing: 1 }));
    expect(lost.ok).toBe(false);
    expect(lost.problems).toEqual([expect.stringMatching(/1 job did not succeed .*missing 1/)]);
    expect(buildReport(input({ succeeded: 9, running: 1 })).ok).toBe(false);
    expect(buildReport(input({ succeeded: 9, dead: 1 })).ok).toBe(false);
  });

  it('tells what became of the late writes as the numbers say, whichever way the timing went', () => {
    const lines = (refusals: ReportInput['refusals'], lost: number) => {
      const counters = { completed: 0, retried: 0, lost, recovered: 0 } as WorkerSummary['counters'];
      const workers = [{ number: 3, fate: 'stopped', pausedForMs: 1, counters, runs: 0, failure: null }];
      return formatReport(buildReport({ ...input({}), refusals, workers: workers as WorkerSummary[] }));
    };
    const dropped = lines([], 4);
    expect(dropped).toMatch(/fenced +0 late writes refused/);
    expect(dropped).toMatch(/late work +none reached the database: the worker dropped 4 outcomes itself/);
    expect(dropped).not.toMatch(/met the fence/);
    const fenced = lines(
      [{ queue: 'emails', operation: 'complete', count: 2, lastRefusedAt: new Date() }],
      2,
    );
    expect(fenced).toMatch(/late work +every late write was sent and met the fence: 2 writes refused/);
    const both = lines([{ queue: 'emails', operation: 'complete', count: 1, lastRefusedAt: new Date() }], 3);
    expect(both).toMatch(
      /late work +1 late write refused by the fence; 2 outcomes dropped by the worker itself/,
    );
  });

  it('fails on a duplicate run that no lost lease explains', () => {
    const report = buildReport({ ...input({}), duplicates: { jobs: 1, extraRuns: 1, unexplained: 1 } });
    expect(report.ok).toBe(false);
  });
});
