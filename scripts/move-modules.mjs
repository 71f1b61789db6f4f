#!/usr/bin/env node
// Moves modules of src/ (or chaos/, bench/) and rewrites every relative import of them (and theirs), so that a layout
// change is one reviewed mapping rather than hundreds of hand edits. Reads a mapping file, one move
// a line: `src/old/path.ts src/new/path.ts` or `chaos/a.mjs chaos/faults/a.mjs` (blank lines and `#`
// comments skipped). It then:
// - `git mv`s each file;
// - rewrites relative specifiers ('./x.js', '../y.ts', import('...'), new URL('...')) in the
//   tracked .ts/.mjs/.js files of src/, test/, bench/, chaos/ and scripts/, whether the importer,
//   the imported file or both moved, including `dist/...js` twins of moved sources;
// - rewrites the quoted strings 'dist/old/path.js' and 'src/old/path.ts' (lists of modules);
// - rewrites mentions of the old path (under src/, as `old/path.ts`) in the tracked Markdown.
// Usage: node scripts/move-modules.mjs mapping.txt   (then: npx biome check --write ., npm run lint)
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const git = (...args) => execFileSync('git', args, { cwd: root, encoding: 'utf8' });

const moves = new Map();
for (const line of readFileSync(resolve(process.argv[2]), 'utf8').split('\n')) {
  const text = line.replace(/#.*/, '').trim();
  if (!text) continue;
  const [from, to] = text.split(/\s+/);
  const ext = (path) => path?.match(/\.[a-z]+$/)?.[0];
  if (
    !from ||
    !to ||
    ext(from) !== ext(to) ||
    !/^(src|chaos|bench)\//.test(from) ||
    from.split('/')[0] !== to.split('/')[0]
  ) {
    throw new Error(`not a move within src/, chaos/ or bench/ keeping the file's ending: ${line}`);
  }
  moves.set(from, to);
}
// dist/ twins: tsc's per-module output, which tests, bench and chaos import.
const twin = (path) => `dist/${path.slice('src/'.length).replace(/\.ts$/, '.js')}`;
const distMoves = new Map(
  [...moves].filter(([from]) => from.startsWith('src/')).map(([from, to]) => [twin(from), twin(to)]),
);

const tracked = git('ls-files', 'src', 'test', 'bench', 'chaos', 'scripts', '*.md')
  .split('\n')
  .filter(Boolean);
const code = tracked.filter((p) => /\.(ts|mts|mjs|js)$/.test(p) && !p.startsWith('src/dashboard/assets/'));
const docs = tracked.filter((p) => p.endsWith('.md'));

// Where a file lives after the moves, and the old path of a path that may have moved.
const newPath = (path) => moves.get(path) ?? path;

function rewriteSpecifier(oldFile, spec) {
  if (!spec.startsWith('./') && !spec.startsWith('../')) return spec;
  const target = posix.normalize(posix.join(posix.dirname(oldFile), spec));
  const asTs = target.replace(/\.(js|ts)$/, '.ts');
  let movedTarget = null;
  if (moves.has(asTs)) movedTarget = moves.get(asTs).replace(/\.ts$/, spec.match(/\.(js|ts)$/)?.[0] ?? '.js');
  else if (distMoves.has(target)) movedTarget = distMoves.get(target);
  const newFile = newPath(oldFile);
  if (movedTarget === null && newFile === oldFile) return spec;
  const finalTarget = movedTarget ?? target;
  let rel = posix.relative(posix.dirname(newFile), finalTarget);
  if (!rel.startsWith('.')) rel = `./${rel}`;
  return rel;
}

const SPECIFIER =
  /(\bfrom\s+|\bimport\s*\(\s*|\bimport\s+|\bnew URL\(\s*|vi\.mock\(\s*)(['"])(\.{1,2}\/[^'"]+)\2/g;
const QUOTED = /(['"])((?:dist|src)\/[^'"]+)\1/g;

for (const [from, to] of moves) {
  mkdirSync(dirname(join(root, to)), { recursive: true });
  git('mv', from, to);
}
let changed = 0;
for (const oldFile of code) {
  const file = join(root, newPath(oldFile));
  const text = readFileSync(file, 'utf8');
  const next = text
    .replace(
      SPECIFIER,
      (_all, lead, quote, spec) => `${lead}${quote}${rewriteSpecifier(oldFile, spec)}${quote}`,
    )
    .replace(
      QUOTED,
      (_all, quote, path) => `${quote}${moves.get(path) ?? distMoves.get(path) ?? path}${quote}`,
    );
  if (next !== text) {
    writeFileSync(file, next);
    changed++;
  }
}
const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
for (const doc of docs) {
  const file = join(root, doc);
  let text = readFileSync(file, 'utf8');
  const before = text;
  for (const [from, to] of moves) {
    const inSrc = from.startsWith('src/');
    const short = inSrc ? from.slice('src/'.length) : from;
    const shortTo = inSrc ? to.slice('src/'.length) : to;
    // `src/old.ts` anywhere (a URL too), then the bare `old.ts` not inside a longer path or name.
    if (inSrc) text = text.replace(new RegExp(`(?<![\\w.-])src/${escapeRegExp(short)}`, 'g'), to);
    text = text.replace(new RegExp(`(?<![\\w/.-])${escapeRegExp(short)}`, 'g'), shortTo);
  }
  if (text !== before) {
    writeFileSync(file, text);
    changed++;
  }
}
console.log(`move-modules: ${moves.size} files moved, ${changed} files rewritten`);
