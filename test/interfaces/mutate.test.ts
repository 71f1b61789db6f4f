import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// The mutation gate (scripts/mutate.mjs, issue 32): its table must load and apply to today's code
// (a rewrite that moves a mutated text, or a table that no longer loads, fails here at once rather
// than in CI's mutation step), it must cover the hot transitions, and its exit code must be the
// verdict: a planted survivor or a mutant whose text is gone fails the run; an equivalent mutant
// listed with its reason does not.

const root = fileURLToPath(new URL('../..', import.meta.url));
const script = join(root, 'scripts/mutate.mjs');
const table = (await import('../../scripts/mutants.mjs' as string)) as {
  TRANSITIONS: { name: string; fenced: boolean }[];
  MUTANTS: { name: string; covers: string; ci?: boolean; equivalent?: string }[];
};

// The vitest that runs this file must not leak its own settings into the runs the script starts.
const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('VITEST')));

function mutate(args: string[]): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [script, ...args], {
    cwd: root,
    encoding: 'utf8',
    env,
    timeout: 120_000,
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}${run.error ? String(run.error) : ''}` };
}

const scratch = mkdtempSync(join(tmpdir(), 'leasehold-mutate-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('npm run mutate', () => {
  it('--list: every mutant of the table applies to the code as it is, and names test files that exist', () => {
    const { status, output } = mutate(['--list']);
    expect(status, output).toBe(0);
    for (const mutant of table.MUTANTS) expect(output, output).toContain(`ok  ${mutant.name} [`);
    expect(output).toContain(`${table.MUTANTS.length} mutants, 0 with problems`);
  });

  it('covers every hot transition, and its CI subset covers every fenced one', () => {
    const covered = new Set(table.MUTANTS.map((m) => m.covers));
    const inCi = new Set(table.MUTANTS.filter((m) => m.ci).map((m) => m.covers));
    expect(table.TRANSITIONS.map((t) => t.name).filter((name) => !covered.has(name))).toEqual([]);
    expect(table.TRANSITIONS.filter((t) => t.fenced && !inCi.has(t.name)).map((t) => t.name)).toEqual([]);
    expect(
      table.MUTANTS.map((m) => m.covers).filter((c) => !table.TRANSITIONS.some((t) => t.name === c)),
    ).toEqual([]);
    // An equivalent mutant is never part of the CI subset: it proves nothing there.
    expect(table.MUTANTS.filter((m) => m.ci && m.equivalent).map((m) => m.name)).toEqual([]);
  });

  it('exits non-zero on a planted survivor and on a mutant whose text is gone; passes an equivalent with its reason', () => {
    // A scratch tree: one source file, one test of it, the repository's node_modules.
    mkdirSync(join(scratch, 'src'));
    mkdirSync(join(scratch, 'test'));
    symlinkSync(join(root, 'node_modules'), join(scratch, 'node_modules'), 'dir');
    writeFileSync(join(scratch, 'package.json'), '{ "type": "module" }\n');
    writeFileSync(join(scratch, 'vitest.config.mjs'), "export default { cacheDir: '.vite-cache' };\n");
    writeFileSync(join(scratch, 'src/add.mjs'), 'export const add = (a, b) => a + b;\n');
    writeFileSync(
      join(scratch, 'test/add.test.ts'),
      "import { expect, it } from 'vitest';\nimport { add } from '../src/add.mjs';\n" +
        "it('adds', () => expect(add(2, 3)).toBe(5));\n",
    );
    const row = (name: string, find: string, replace: string, extra = '') =>
      `{ name: '${name}', covers: 'scratch', file: 'src/add.mjs', find: ${JSON.stringify(find)}, ` +
      `replace: ${JSON.stringify(replace)}, tests: ['add']${extra} }`;
    const killed = row('planted-killed', 'a + b', 'a - b');
    const survivor = row('planted-survivor', 'a + b', 'b + a');
    const gone = row('planted-gone', 'a * b', 'a / b');
    const equivalent = row('planted-equivalent', 'a + b', 'b + a', ", equivalent: 'addition commutes'");
    const stale = row('planted-stale-equivalent', 'a + b', 'a - b', ", equivalent: 'it is not'");
    const writeTable = (file: string, rows: string[]) => {
      writeFileSync(join(scratch, file), `export const MUTANTS = [\n${rows.join(',\n')}\n];\n`);
      return join(scratch, file);
    };

    const failing = mutate([
      '--root',
      scratch,
      '--table',
      writeTable('failing.mjs', [killed, survivor, gone, stale]),
    ]);
    expect(failing.status, failing.output).toBe(1);
    expect(failing.output).toMatch(/^killed planted-killed /m);
    expect(failing.output).toMatch(/^SURVIVED planted-survivor /m);
    expect(failing.output).toMatch(/^NOT APPLIED planted-gone: .*found 0 times/m);
    expect(failing.output).toMatch(/^KILLED, though listed as equivalent planted-stale-equivalent /m);
    expect(failing.output).toContain(
      'failing: planted-survivor (SURVIVED), planted-gone (not applied), planted-stale-equivalent',
    );

    const passing = mutate(['--root', scratch, '--table', writeTable('passing.mjs', [killed, equivalent])]);
    expect(passing.status, passing.output).toBe(0);
    expect(passing.output).toMatch(/^survived \(equivalent\) planted-equivalent /m);
    expect(passing.output).toContain('planted-equivalent is equivalent: addition commutes');
    // The source is put back after every mutant.
    expect(readFileSync(join(scratch, 'src/add.mjs'), 'utf8')).toBe('export const add = (a, b) => a + b;\n');
  });
});
