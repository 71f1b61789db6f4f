import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { databaseUrl, testPool, waitFor } from '../support/db.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

// The README's quick start, exactly as a reader copies it: the ```ts block that starts with
// "// example: quick-start". It sits inside the package, so 'leasehold' resolves to the built
// package itself (dist/ and its .d.ts), as it would from node_modules.
const quickStart = /```ts\n(\/\/ example: quick-start\n[\s\S]*?)```/.exec(
  readFileSync(`${root}/README.md`, 'utf8'),
)?.[1];
const dir = `${root}.tmp/readme-ts`;

describe('the README quick start', () => {
  it('is in the README as a TypeScript block', () => {
    expect(quickStart).toBeDefined();
    // A quick start: short enough to read at a glance.
    expect(quickStart!.trim().split('\n').length).toBeLessThanOrEqual(22);
  });

  // tsc --strict on one file of the scratch app, against the built package; the exit code and output.
  async function typeCheck(name: string, source: string): Promise<{ code: number; stdout: string }> {
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}/${name}.ts`, source);
    const args = [
      tsc,
      '--noEmit',
      '--strict',
      '--target',
      'es2022',
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--types',
      'node',
      `${dir}/${name}.ts`,
    ];
    return promisify(execFile)(process.execPath, args, { cwd: root }).then(
      () => ({ code: 0, stdout: '' }),
      (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
    );
  }

  it('type-checks under tsc --strict against the built package, as written', async () => {
    const result = await typeCheck('quick-start', quickStart!);
    expect(result.stdout).toBe('');
    expect(result.code).toBe(0);
  }, 60_000);

  it("refuses to compile an enqueue whose payload does not match the task's schema", async () => {
    const enqueueLine =
      "const { result } = await lh.enqueueAndWait(welcome, { to: 'ada@example.com', template: 'welcome' });";
    expect(quickStart).toContain(enqueueLine);
    const misspelt = quickStart!.replace(
      enqueueLine,
      "const { result } = await lh.enqueueAndWait(welcome, { to: 'ada@example.com', templat: 'welcome' });",
    );
    const result = await typeCheck('quick-start-wrong', misspelt);
    expect(result.code).not.toBe(0);
    expect(result.stdout).toMatch(/quick-start-wrong\.ts\(\d+,\d+\): error TS\d+:/);
    expect(result.stdout).toContain('templat');
  }, 60_000);

  it('refuses to compile a use of the result its handler does not return (the result is typed)', async () => {
    const resultLine = 'console.log(`sent at $' + '{result.sentAt}`);';
    expect(quickStart).toContain(resultLine);
    const wrong = quickStart!.replace(resultLine, resultLine.replace('sentAt', 'sentOn'));
    const result = await typeCheck('quick-start-result', wrong);
    expect(result.code).not.toBe(0);
    expect(result.stdout).toContain('sentOn');
  }, 60_000);

  it('runs: the job is handled, enqueueAndWait gets its result, and SIGTERM stops the worker and the process', async () => {
    mkdirSync(dir, { recursive: true });
    const js = ts.transpileModule(quickStart!, {
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext },
    }).outputText;
    writeFileSync(`${dir}/quick-start.mjs`, js);
    // A database of its own: the quick start uses the default schema, and drains what it finds.
    const database = `readme_ts_${randomBytes(4).toString('hex')}`;
    await testPool(1).query(`CREATE DATABASE ${database}`);
    const url = new URL(databaseUrl());
    url.pathname = `/${database}`;
    const child = spawn(process.execPath, [`${dir}/quick-start.mjs`], {
      env: { ...process.env, DATABASE_URL: url.toString() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      await waitFor(
        () =>
          /sending welcome to ada@example\.com, attempt 1\nsent at \d{4}-\d\d-\d\dT[\d:.]+Z\n/.test(stdout),
        {
          timeoutMs: 30_000,
          what: `the quick start to handle its job and print its result (stderr: ${stderr})`,
        },
      );
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await exited;
      await testPool(1).query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    }
  }, 60_000);
});
