import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { showOutputOnFailure } from '../support/child-output.js';
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

  // The quick start as written and two copies with one mistake each, type-checked by one tsc
  // --strict run against the built package (three runs cost three times the compiler's start-up,
  // most of a run). The three files import nothing from one another, so each file's diagnostics are
  // its own; a diagnostic naming no file (a bad option) is everybody's.
  const variants = {
    asWritten: 'quick-start',
    wrongPayload: 'quick-start-wrong',
    wrongResult: 'quick-start-result',
  } as const;
  const enqueueLine =
    "const { result } = await lh.enqueueAndWait(welcome, { to: 'ada@example.com', template: 'welcome' });";
  const resultLine = 'console.log(`sent at $' + '{result.sentAt}`);';
  let checked: Promise<{ code: number; diagnostics: string[] }> | undefined;
  function typeCheckAll(): Promise<{ code: number; diagnostics: string[] }> {
    checked ??= (async () => {
      mkdirSync(dir, { recursive: true });
      writeFileSync(`${dir}/${variants.asWritten}.ts`, quickStart!);
      writeFileSync(
        `${dir}/${variants.wrongPayload}.ts`,
        quickStart!.replace(
          enqueueLine,
          "const { result } = await lh.enqueueAndWait(welcome, { to: 'ada@example.com', templat: 'welcome' });",
        ),
      );
      writeFileSync(
        `${dir}/${variants.wrongResult}.ts`,
        quickStart!.replace(resultLine, resultLine.replace('sentAt', 'sentOn')),
      );
      const args = [
        tsc,
        '--noEmit',
        '--strict',
        '--pretty',
        'false',
        '--target',
        'es2022',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--types',
        'node',
        ...Object.values(variants).map((name) => `${dir}/${name}.ts`),
      ];
      const { code, stdout } = await promisify(execFile)(process.execPath, args, { cwd: root }).then(
        () => ({ code: 0, stdout: '' }),
        (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
      );
      // One diagnostic per entry: its first line, with the indented lines that continue it.
      const diagnostics: string[] = [];
      for (const line of stdout.split('\n')) {
        if (line.trim() === '') continue;
        if (/^\s/.test(line) && diagnostics.length > 0) diagnostics[diagnostics.length - 1] += `\n${line}`;
        else diagnostics.push(line);
      }
      return { code, diagnostics };
    })();
    return checked;
  }
  /** The diagnostics of one variant's file, and those that name no variant's file. */
  async function diagnosticsOf(name: string): Promise<{ own: string[]; unattributed: string[] }> {
    const { diagnostics } = await typeCheckAll();
    const fileOf = (d: string) => Object.values(variants).find((v) => d.includes(`${v}.ts(`));
    return {
      own: diagnostics.filter((d) => fileOf(d) === name),
      unattributed: diagnostics.filter((d) => fileOf(d) === undefined),
    };
  }

  it('type-checks under tsc --strict against the built package, as written', async () => {
    const { own, unattributed } = await diagnosticsOf(variants.asWritten);
    expect(own).toEqual([]);
    expect(unattributed).toEqual([]);
    // The run did fail, on the two wrong copies only: the compiler really checked.
    expect((await typeCheckAll()).code).not.toBe(0);
  }, 90_000);

  it("refuses to compile an enqueue whose payload does not match the task's schema", async () => {
    expect(quickStart).toContain(enqueueLine);
    const { own } = await diagnosticsOf(variants.wrongPayload);
    expect(own.length).toBeGreaterThan(0);
    expect(own.join('\n')).toMatch(/quick-start-wrong\.ts\(\d+,\d+\): error TS\d+:/);
    expect(own.join('\n')).toContain('templat');
  }, 90_000);

  it('refuses to compile a use of the result its handler does not return (the result is typed)', async () => {
    expect(quickStart).toContain(resultLine);
    const { own } = await diagnosticsOf(variants.wrongResult);
    expect(own.length).toBeGreaterThan(0);
    expect(own.join('\n')).toContain('sentOn');
  }, 90_000);

  it('runs: the job is handled, enqueueAndWait gets its result, and the process stops the worker and exits by itself', async () => {
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
    showOutputOnFailure('the README quick start', () => ({ stdout, stderr }));
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
      // No signal: worker.stop() and lh.close() end it, within a deadline.
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<'still running'>((resolve) => {
        timer = setTimeout(() => resolve('still running'), 15_000);
      });
      const ended = await Promise.race([exited, deadline]);
      clearTimeout(timer);
      expect(ended, `stdout: ${stdout}\nstderr: ${stderr}`).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await exited;
      await testPool(1).query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    }
  }, 60_000);
});
