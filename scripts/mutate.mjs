#!/usr/bin/env node
// The mutation gate (`npm run mutate`; .ci/run runs `--ci`): each mutant (scripts/mutants.mjs) is
// one string replacement in the code that keeps the promise (the fence, the claim, the sweep, the
// hand-overs, the handler's transaction, the effects ledger, the limits, the schedule tick). For
// each, the file is changed, only the test files that should notice are run, and the file is
// restored, whatever happens. A mutant whose tests still pass survived: either a test is missing,
// or the mutant is equivalent, which its row must say (with why). The run exits 1 on a survivor not
// listed as equivalent, on a mutant whose text is gone (NOT APPLIED: re-point it), and on a listed
// equivalent that was killed (its reason is stale), so the exit code is the verdict.
//
//   node scripts/mutate.mjs                every mutant
//   node scripts/mutate.mjs fence sweep    only the mutants whose name contains one of the words
//   node scripts/mutate.mjs --ci           the CI subset (the rows marked ci)
//   node scripts/mutate.mjs --list         check the table without running anything: every text
//                                          found exactly once, every test file present (npm test
//                                          runs this: test/interfaces/mutate.test.ts)
//   --root DIR --table FILE                another tree and table (the planted-mutant test's scratch)
//
// Run it on a clean tree, with nothing else reading it: it edits the files in place (and puts
// each back before the next). .ci/run runs it after every other pass of this tree has ended.

import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const flags = new Set(args.filter((a) => a === '--list' || a === '--ci'));
const option = (name) => {
  const at = args.indexOf(name);
  if (at === -1) return null;
  const value = args[at + 1];
  if (!value || value.startsWith('--')) usage(`${name} takes a path`);
  args.splice(at, 2);
  return value;
};
function usage(message) {
  console.error(
    `mutate: ${message}\nusage: node scripts/mutate.mjs [--list] [--ci] [--root DIR] [--table FILE] [word ...]`,
  );
  process.exit(2);
}
const rootOption = option('--root');
const tableOption = option('--table');
const root = `${rootOption ? resolve(rootOption) : fileURLToPath(new URL('..', import.meta.url))}/`.replace(
  /\/+$/,
  '/',
);
const filters = args.filter((a) => !flags.has(a));
for (const f of filters) if (f.startsWith('--')) usage(`unknown option ${f}`);

const table = await import(
  tableOption ? pathToFileURL(resolve(tableOption)).href : new URL('./mutants.mjs', import.meta.url).href
);
const MUTANTS = table.MUTANTS;

// Test files live in room folders (test/storage/, test/runtime/, ...): each is found by its name.
const testFiles = readdirSync(`${root}test`, { recursive: true }).filter((f) =>
  String(f).endsWith('.test.ts'),
);
function testFile(name) {
  const found = testFiles.find((f) => f === `${name}.test.ts` || f.endsWith(`/${name}.test.ts`));
  return found ? `test/${found}` : null;
}

/** Problems with one row of the table, before anything runs: missing fields, tests or texts. */
function rowProblems(mutant) {
  const problems = [];
  for (const field of ['name', 'covers', 'file', 'find', 'replace', 'tests']) {
    if (mutant[field] === undefined) problems.push(`no ${field}`);
  }
  if (mutant.equivalent !== undefined && !(typeof mutant.equivalent === 'string' && mutant.equivalent.trim()))
    problems.push('equivalent needs its reason');
  for (const name of mutant.tests ?? []) if (!testFile(name)) problems.push(`no test file ${name}.test.ts`);
  let text = null;
  try {
    text = readFileSync(`${root}${mutant.file}`, 'utf8');
  } catch {
    problems.push(`no file ${mutant.file}`);
  }
  if (text !== null) {
    const counts = edits(mutant).map(([find]) => text.split(find).length - 1);
    if (counts.some((n) => n !== 1))
      problems.push(`NOT APPLIED (texts found ${counts.join('/')} times: re-point it)`);
  }
  return problems;
}

function edits(mutant) {
  return [[mutant.find, mutant.replace], ...(mutant.more ?? [])];
}

const names = new Set();
for (const mutant of MUTANTS) {
  if (names.has(mutant.name)) usage(`two mutants are named ${mutant.name}`);
  names.add(mutant.name);
}
const chosen = MUTANTS.filter(
  (mutant) =>
    (!flags.has('--ci') || mutant.ci) &&
    (filters.length === 0 || filters.some((f) => mutant.name.includes(f))),
);
if (chosen.length === 0) usage(`no mutant matches ${filters.join(' ')}`);

if (flags.has('--list')) {
  let bad = 0;
  for (const mutant of chosen) {
    const problems = rowProblems(mutant);
    if (problems.length > 0) bad += 1;
    const tags = [mutant.ci ? 'ci' : null, mutant.equivalent ? 'equivalent' : null].filter(Boolean);
    console.log(
      `${problems.length === 0 ? 'ok ' : 'BAD'} ${mutant.name} [${mutant.covers}] ${mutant.file}` +
        ` (${(mutant.tests ?? []).join(', ')})${tags.length ? ` {${tags.join(', ')}}` : ''}` +
        (problems.length ? `: ${problems.join('; ')}` : ''),
    );
  }
  console.log(`\n${chosen.length} mutants, ${bad} with problems`);
  process.exit(bad === 0 ? 0 : 1);
}

const results = [];
let restore = null;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    restore?.();
    process.exit(130);
  });
}

for (const mutant of chosen) {
  const problems = rowProblems(mutant);
  if (problems.length > 0) {
    results.push({ mutant, verdict: 'not applied', detail: problems.join('; '), ms: 0 });
    console.log(`NOT APPLIED ${mutant.name}: ${problems.join('; ')}`);
    continue;
  }
  const path = `${root}${mutant.file}`;
  const original = readFileSync(path, 'utf8');
  const { atime, mtime } = statSync(path);
  const tests = mutant.tests.map(testFile);
  // Put back with its old times too: a build-if-stale check after the run finds dist/ still fresh.
  restore = () => {
    writeFileSync(path, original);
    utimesSync(path, atime, mtime);
  };
  const started = Date.now();
  let run;
  try {
    let mutated = original;
    for (const [find, replace] of edits(mutant)) mutated = mutated.replace(find, () => replace);
    writeFileSync(path, mutated);
    run = spawnSync(
      process.execPath,
      [`${root}node_modules/vitest/vitest.mjs`, 'run', '--bail=1', ...tests],
      {
        cwd: root,
        encoding: 'utf8',
        timeout: 300_000,
        env: process.env,
      },
    );
  } finally {
    restore();
    restore = null;
  }
  const survived = run.status === 0;
  const verdict = survived
    ? mutant.equivalent
      ? 'survived (equivalent)'
      : 'SURVIVED'
    : mutant.equivalent
      ? 'KILLED, though listed as equivalent'
      : 'killed';
  const detail = run.signal ? `timeout, ${run.signal}` : run.error ? String(run.error) : '';
  results.push({ mutant, verdict, detail, ms: Date.now() - started });
  console.log(
    `${verdict} ${mutant.name} (${Math.round((Date.now() - started) / 1000)} s: ${tests.join(' ')})${detail ? ` [${detail}]` : ''}`,
  );
  // A survivor's run passed: show what it ran, so the missing test is easy to find.
  if (survived && !mutant.equivalent) console.log(run.stdout.split('\n').slice(-12).join('\n'));
}

const failed = results.filter((r) => r.verdict !== 'killed' && r.verdict !== 'survived (equivalent)');
console.log('\n| mutant | covers | file | tests run | result |\n| --- | --- | --- | --- | --- |');
for (const r of results) {
  console.log(
    `| ${r.mutant.name} | ${r.mutant.covers} | ${r.mutant.file} | ${(r.mutant.tests ?? []).join(', ')} | ${r.verdict} |`,
  );
}
for (const r of results.filter((x) => x.verdict === 'survived (equivalent)')) {
  console.log(`\n${r.mutant.name} is equivalent: ${r.mutant.equivalent}`);
}
console.log(
  `\n${results.length - failed.length} of ${results.length} passed the gate (killed, or equivalent with a reason); ` +
    `failing: ${failed.map((r) => `${r.mutant.name} (${r.verdict})`).join(', ') || 'none'}`,
);
process.exitCode = failed.length === 0 ? 0 : 1;
