import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// Every link of README.md and docs/ resolves: a relative link (or an absolute one into this
// repository, as the README's are, so that they work on the registry's page) names a file that
// exists, and its anchor a heading of that file; every repository path a doc names in backticks
// (src/..., test/..., scripts/...) exists, a glob matching at least one file.
const root = fileURLToPath(new URL('../..', import.meta.url));
const REPO_URL =
  /^https:\/\/(?:github\.com\/leasehold\/leasehold\/(?:blob|tree)\/main|raw\.githubusercontent\.com\/leasehold\/leasehold\/main)\/(.*)$/;
const docs = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchors of a Markdown file's headings (duplicates numbered -1, -2...). */
function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of readFileSync(join(root, file), 'utf8').split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = (heading[1] as string)
      .replace(/<[^>]+>/g, '')
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The text outside fenced code blocks (links in code are code, not links). */
function prose(text: string): string {
  return text.replace(/^\s*```[\s\S]*?^\s*```/gm, '');
}

/** What is wrong with `target`, linked from `file`; null when it resolves. */
function problemOf(file: string, target: string): string | null {
  const repo = REPO_URL.exec(target);
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) && !repo) return null; // elsewhere on the web
  const [path = '', anchor] = (repo ? (repo[1] as string) : target).split('#');
  const resolved = repo ? normalize(path) : path === '' ? file : normalize(join(dirname(file), path));
  if (resolved.startsWith('..')) return `${target}: outside the repository`;
  const resolvedPath = resolved.replace(/\/$/, '');
  if (!existsSync(join(root, resolvedPath))) return `${target}: no such file ${resolvedPath}`;
  if (anchor !== undefined && anchor !== '') {
    if (!resolvedPath.endsWith('.md')) return null;
    if (!anchorsOf(resolvedPath).has(decodeURIComponent(anchor)))
      return `${target}: no heading #${anchor} in ${resolvedPath}`;
  }
  return null;
}

/** Files of the repository matching a path with `*` globs (in the last parts). */
function matches(pattern: string): boolean {
  if (!pattern.includes('*')) return existsSync(join(root, pattern));
  const parts = pattern.split('/');
  const walk = (dir: string, rest: string[]): boolean => {
    const [head, ...tail] = rest;
    if (head === undefined) return true;
    if (!head.includes('*')) {
      const next = join(dir, head);
      return existsSync(next) && (tail.length === 0 || statSync(next).isDirectory()) && walk(next, tail);
    }
    const re = new RegExp(`^${head.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);
    if (!existsSync(dir) || !statSync(dir).isDirectory()) return false;
    return readdirSync(dir).some(
      (name) => re.test(name) && (tail.length === 0 || walk(join(dir, name), tail)),
    );
  };
  return walk(root, parts);
}

// A repository path in backticks: a top folder of this repository, then at least one more part.
const NAMED_PATH = /`((?:src|test|bench|scripts|docs|chaos|\.ci)\/[A-Za-z0-9_.*/-]*)`/g;

describe('the documentation', () => {
  it('every link and anchor in README.md and docs/ resolves', () => {
    const problems: string[] = [];
    let links = 0;
    for (const file of docs) {
      for (const match of prose(readFileSync(join(root, file), 'utf8')).matchAll(
        /\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g,
      )) {
        links++;
        const problem = problemOf(file, match[1] as string);
        if (problem) problems.push(`${file}: ${problem}`);
      }
    }
    expect(links).toBeGreaterThan(50); // the check read the links
    expect(problems).toEqual([]);
  });

  it('every repository path a doc names exists', () => {
    const problems: string[] = [];
    let named = 0;
    for (const file of docs) {
      for (const match of readFileSync(join(root, file), 'utf8').matchAll(NAMED_PATH)) {
        named++;
        const path = (match[1] as string).replace(/\/$/, '');
        if (!matches(path)) problems.push(`${file}: ${path}`);
      }
    }
    expect(named).toBeGreaterThan(20);
    expect(problems).toEqual([]);
  });

  it('the checks catch a broken link, anchor and path', () => {
    expect(problemOf('README.md', 'docs/no-such-file.md')).toMatch(/no such file/);
    expect(problemOf('README.md', 'docs/api.md#no-such-heading')).toMatch(/no heading/);
    expect(problemOf('docs/api.md', '#no-such-heading')).toMatch(/no heading/);
    expect(
      problemOf('README.md', 'https://github.com/leasehold/leasehold/blob/main/docs/nothing.md'),
    ).toMatch(/no such file/);
    expect(problemOf('README.md', 'https://github.com/leasehold/leasehold/blob/main/docs/api.md')).toBeNull();
    expect(matches('test/hostile/*.test.ts')).toBe(true);
    expect(matches('test/hostile-*.test.ts')).toBe(false);
  });
});
