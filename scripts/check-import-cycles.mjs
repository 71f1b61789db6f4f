#!/usr/bin/env node
// `npm run lint` runs this: fails on any import circle among the files of `src/` (type-only
// imports, re-exports and dynamic imports included, since they tie modules together just as much
// for a reader), on any import from one room to another that the room table of
// docs/architecture.md does not allow (see rooms.mjs), and on any `src/` file longer than
// MAX_LINES unless it is a file of forwards only (see forwards.mjs), and on any folder of `src/`
// holding more than MAX_FILES files directly (a room that grows gets sub-rooms by meaning; the
// length bound alone pushed toward splitting files by size). Imports are read with the
// TypeScript compiler's own pre-processor (already a devDependency), so no file is executed and
// nothing needs a network.
//
// Usage: node scripts/check-import-cycles.mjs [srcDir] [roomTable.md]
// (defaults: src/ and docs/architecture.md; the tests run it on a scratch copy).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { FORWARDS_MAX_LINES, isForwardsOnly } from './forwards.mjs';
import { readRoomTable, roomOf } from './rooms.mjs';

const MAX_LINES = 400;
const MAX_FILES = 15;
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const srcDir = resolve(root, process.argv[2] ?? 'src');
const tablePath = resolve(root, process.argv[3] ?? 'docs/architecture.md');

function listFiles(dir) {
  const files = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) files.push(...listFiles(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) files.push(path);
  }
  return files;
}

// Folders of `dir` (itself included) that hold more than MAX_FILES files directly, any kind of file.
function wideFolders(dir) {
  const entries = readdirSync(dir, { withFileTypes: true });
  const own = entries.filter((entry) => !entry.isDirectory()).length;
  const wide = own > MAX_FILES ? [{ dir, count: own }] : [];
  for (const entry of entries) if (entry.isDirectory()) wide.push(...wideFolders(join(dir, entry.name)));
  return wide;
}

// Resolves a relative specifier the way NodeNext does for our sources: `./x.js` names `./x.ts`.
function resolveImport(from, specifier, known) {
  if (!specifier.startsWith('.')) return null;
  const base = resolve(dirname(from), specifier);
  for (const candidate of [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')]) {
    if (known.has(candidate)) return candidate;
  }
  return null;
}

const files = listFiles(srcDir).sort();
const known = new Set(files);
const graph = new Map();
const problems = [];
const rooms = readRoomTable(readFileSync(tablePath, 'utf8'), relative(root, tablePath));
const shown = (file) => relative(srcDir, file);
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_LINES && !(lines <= FORWARDS_MAX_LINES && isForwardsOnly(text, file))) {
    problems.push(`${relative(root, file)}: ${lines} lines (limit ${MAX_LINES})`);
  }
  const from = roomOf(rooms, shown(file));
  if (!from) problems.push(`${shown(file)}: in no room of the room table (${rooms.source}); add it to one`);
  const { importedFiles } = ts.preProcessFile(text, true, true);
  const targets = new Set();
  for (const { fileName } of importedFiles) {
    const target = resolveImport(file, fileName, known);
    if (!target) continue;
    targets.add(target);
    const to = roomOf(rooms, shown(target));
    if (from && to && from !== to && !from.mayImport.has(to.name)) {
      problems.push(
        `${shown(file)} imports ${shown(target)}: room ${from.name} may not import room ${to.name} (${rooms.source})`,
      );
    }
  }
  graph.set(file, [...targets].sort());
}

// Tarjan's strongly connected components: every component of more than one file (or a file that
// imports itself) is a circle.
let index = 0;
const indices = new Map();
const lowlinks = new Map();
const stack = [];
const onStack = new Set();
const circles = [];
function connect(node) {
  indices.set(node, index);
  lowlinks.set(node, index);
  index++;
  stack.push(node);
  onStack.add(node);
  for (const next of graph.get(node)) {
    if (!indices.has(next)) {
      connect(next);
      lowlinks.set(node, Math.min(lowlinks.get(node), lowlinks.get(next)));
    } else if (onStack.has(next)) {
      lowlinks.set(node, Math.min(lowlinks.get(node), indices.get(next)));
    }
  }
  if (lowlinks.get(node) === indices.get(node)) {
    const component = [];
    let member;
    do {
      member = stack.pop();
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || graph.get(node).includes(node)) circles.push(component.sort());
  }
}
for (const file of files) if (!indices.has(file)) connect(file);

for (const component of circles) {
  const members = new Set(component);
  const edges = component.flatMap((from) =>
    graph
      .get(from)
      .filter((to) => members.has(to))
      .map((to) => `    ${relative(srcDir, from)} -> ${relative(srcDir, to)}`),
  );
  problems.push(`import circle of ${component.length} files:\n${edges.join('\n')}`);
}

for (const { dir, count } of wideFolders(srcDir)) {
  problems.push(
    `${relative(srcDir, dir) || '.'}/ holds ${count} files directly, more than ${MAX_FILES}: group them in sub-rooms by meaning (docs/architecture.md)`,
  );
}

if (problems.length > 0) {
  console.error(`check-import-cycles: ${problems.length} problem(s) in ${relative(root, srcDir)}/`);
  for (const problem of problems) console.error(`  ${problem}`);
  process.exit(1);
}
console.log(
  `check-import-cycles: ${files.length} files in ${relative(root, srcDir)}/ in ${rooms.rooms.length} rooms, no import circles, no import the room table refuses, none over ${MAX_LINES} lines but files of forwards, no folder over ${MAX_FILES} files`,
);
