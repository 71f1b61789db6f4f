import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { assertFreshDist } from '../support/fresh-dist.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-fresh-dist-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function tree(name: string, files: Record<string, number>): string {
  const base = join(dir, name);
  for (const [file, at] of Object.entries(files)) {
    mkdirSync(join(base, file, '..'), { recursive: true });
    writeFileSync(join(base, file), '');
    utimesSync(join(base, file), at, at);
  }
  return base;
}

describe('the guard of tests that run the built package', () => {
  it('passes when every built file is newer than every source file', () => {
    const src = tree('ok-src', { 'a.ts': 1000, 'storage/b.ts': 2000 });
    const dist = tree('ok-dist', { 'a.js': 3000, 'storage/b.js': 3001 });
    expect(() => assertFreshDist(src, dist)).not.toThrow();
  });

  it('fails naming the source file edited after the build, even deep in a folder', () => {
    const src = tree('stale-src', { 'a.ts': 1000, 'storage/fence.ts': 5000 });
    const dist = tree('stale-dist', { 'a.js': 3000, 'storage/fence.js': 3000 });
    expect(() => assertFreshDist(src, dist)).toThrow(/older than .*storage\/fence\.ts: run `npm run build`/);
  });

  it('fails when there is no build', () => {
    const src = tree('nobuild-src', { 'a.ts': 1000 });
    expect(() => assertFreshDist(src, join(dir, 'missing'))).toThrow(/is missing: run `npm run build`/);
  });
});
