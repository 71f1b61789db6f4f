import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { watchOutput } from '../support/child-output.js';
import { buildPrivateCli, root } from '../support/cli-build.js';
import { databaseUrl, migratedClient, waitFor } from '../support/db.js';

// `leasehold work` as an application runs it once installed: an app outside this repository whose
// node_modules holds the built package (its dist/ and package.json, copied) and links to its runtime
// dependencies; the module imports defineTask from 'leasehold' there, and the CLI is the
// package's bin.
let app = '';
let removeBuild = () => {};
const children = new Set<ChildProcess>();

beforeAll(async () => {
  const build = await buildPrivateCli('work-tasks');
  removeBuild = build.remove;
  app = mkdtempSync(join(tmpdir(), 'leasehold-work-tasks-'));
  const pkg = join(app, 'node_modules', 'leasehold');
  mkdirSync(pkg, { recursive: true });
  cpSync(join(build.buildDir, 'dist'), join(pkg, 'dist'), { recursive: true });
  cpSync(join(build.buildDir, 'package.json'), join(pkg, 'package.json'));
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  for (const name of Object.keys(manifest.dependencies)) {
    mkdirSync(dirname(join(app, 'node_modules', name)), { recursive: true });
    symlinkSync(join(root, 'node_modules', name), join(app, 'node_modules', name));
  }
  writeFileSync(join(app, 'package.json'), '{ "type": "module" }\n');
}, 120_000);

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  if (app) rmSync(app, { recursive: true, force: true });
  removeBuild();
});

/** Starts the installed package's CLI in the app; DATABASE_URL only when given. */
function startCli(args: string[], env: Record<string, string> = {}) {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const bin = join(app, 'node_modules', 'leasehold', 'dist', 'cli', 'main.js');
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: app,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const output = watchOutput(child, `leasehold ${args.join(' ')}`);
  const exited = output.exited.then((end) => {
    children.delete(child);
    return end;
  });
  return { child, stderr: output.stderr, exited };
}

// A Standard Schema validator written by hand (no validator library in the app): upper-cases `to`,
// so a handler that sees the upper-cased name got the schema's output, as lh.worker({ tasks }) gives.
const TASKS_MODULE = `
import { defineTask } from 'leasehold';

const recipient = {
  '~standard': {
    version: 1,
    vendor: 'test',
    validate: (value) =>
      typeof value?.to === 'string'
        ? { value: { to: value.to.toUpperCase() } }
        : { issues: [{ message: 'to must be a string' }] },
  },
};

export const welcome = defineTask('welcome', {
  schema: recipient,
  handler: async (job) => ({ greeted: job.payload.to }),
});

// An array of tasks, one of them also exported alone: served once.
export const resize = defineTask('resize', { handler: async (job) => ({ width: job.payload.width * 2 }), concurrency: 2 });
export const media = [resize, defineTask('audit', { handler: async () => 'audited', leaseMs: 5000 })];

// A plain handler beside them, served under its export's name.
export const legacy = async (job) => ({ legacy: job.payload.n });

export const options = { pollIntervalMs: 50 };
`;

describe('leasehold work with defineTask exports (installed package)', () => {
  it('runs every task (alone and in arrays, schemas applied) and plain handlers, then stops on SIGTERM', async () => {
    const lh = await migratedClient();
    writeFileSync(join(app, 'tasks.mjs'), TASKS_MODULE);
    const welcome = await lh.enqueue('welcome', { to: 'ada' });
    const invalid = await lh.enqueue('welcome', { to: 42 });
    const resize = await lh.enqueue('resize', { width: 21 });
    const audit = await lh.enqueue('audit', {});
    const legacy = await lh.enqueue('legacy', { n: 7 });
    const run = startCli(['work', './tasks.mjs', '--schema', lh.schema], { DATABASE_URL: databaseUrl() });
    try {
      for (const { id } of [welcome, resize, audit, legacy]) {
        await waitFor(async () => (await lh.getJob(id))?.status === 'succeeded', { what: `job ${id}` });
      }
      await waitFor(async () => (await lh.getJob(invalid.id))?.status === 'dead', {
        what: 'the job whose payload fails the schema',
      });
      expect((await lh.getJob(welcome.id))?.result).toEqual({ greeted: 'ADA' });
      expect((await lh.getJob(invalid.id))?.lastErrorCode).toBe('PAYLOAD_SCHEMA');
      expect((await lh.getJob(resize.id))?.result).toEqual({ width: 42 });
      expect((await lh.getJob(audit.id))?.result).toBe('audited');
      expect((await lh.getJob(legacy.id))?.result).toEqual({ legacy: 7 });
      run.child.kill('SIGTERM');
      const result = await run.exited;
      expect(result.code, result.stderr).toBe(0);
      const started = /started on (.*); stop it/.exec(result.stderr)?.[1]?.split(', ');
      expect(started?.sort()).toEqual(['audit', 'legacy', 'resize', 'welcome']);
      expect(result.stderr).toMatch(/stopped: claimed=5 completed=4 /);
    } finally {
      run.child.kill('SIGKILL');
    }
  });

  it('refuses a module serving one task name twice, naming it, before reaching a database', async () => {
    writeFileSync(
      join(app, 'twice.mjs'),
      `import { defineTask } from 'leasehold';
export const a = defineTask('mail', { handler: async () => {} });
export const b = defineTask('mail', { handler: async () => {} });
`,
    );
    const result = await startCli(['work', './twice.mjs']).exited;
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/the name mail is already served/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('work --help shows both forms: defineTask exports and plain handlers', async () => {
    const result = await startCli(['work', '--help']).exited;
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/import \{ defineTask \} from 'leasehold';/);
    expect(result.stdout).toMatch(/export const welcome = defineTask\('welcome'/);
    expect(result.stdout).toMatch(/export const emails = async \(job\) =>/);
    expect(result.stdout).toMatch(/\$ (DATABASE_URL=\S+ )?leasehold work \.\/tasks\.mjs/);
  });
});
