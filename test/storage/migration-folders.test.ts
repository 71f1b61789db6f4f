import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadMigrations } from '../../src/migrations/migrator.js';
import { assertFreshDist } from '../support/fresh-dist.js';

// The migrations sit ten to a folder by number (src/migrations/sql/021-030/...). A file put
// anywhere else must fail every migrate() rather than be skipped: each case plants one in a
// scratch copy of the built package and loads the migrations there, in a child process (the
// migrator caches what it read). The copy lives under node_modules/.cache so `pg` resolves.

const root = fileURLToPath(new URL('../..', import.meta.url));
const scratches: string[] = [];
afterAll(() => {
  for (const dir of scratches) rmSync(dir, { recursive: true, force: true });
});

function scratchDist(): string {
  mkdirSync(join(root, 'node_modules/.cache'), { recursive: true });
  const dir = mkdtempSync(join(root, 'node_modules/.cache/leasehold-migrations-'));
  scratches.push(dir);
  cpSync(join(root, 'dist'), join(dir, 'dist'), { recursive: true });
  return join(dir, 'dist');
}

function versionsIn(dist: string): { status: number | null; output: string } {
  const script =
    `const { loadMigrations } = await import(${JSON.stringify(join(dist, 'migrations/migrator.js'))});` +
    'console.log(JSON.stringify(loadMigrations().map((m) => m.version)));';
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: root,
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe('the migration folders', () => {
  it('are read in full, in number order, and the package build ships them', () => {
    assertFreshDist();
    const versions = loadMigrations().map((m) => m.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(versions.length);
    const built = versionsIn(scratchDist());
    expect(built.status).toBe(0);
    expect(JSON.parse(built.output.trim())).toEqual(versions);
  });

  it('refuse a migration file put directly in sql/, naming the folder it belongs in', () => {
    assertFreshDist();
    const dist = scratchDist();
    writeFileSync(join(dist, 'migrations/sql/028_stray.sql'), 'SELECT 1;\n');
    const result = versionsIn(dist);
    expect(result.status).not.toBe(0);
    expect(result.output).toContain('migration file 028_stray.sql is in sql/; it belongs in sql/021-030/');
  });

  it('refuse a migration file in the folder of another range', () => {
    assertFreshDist();
    const dist = scratchDist();
    writeFileSync(join(dist, 'migrations/sql/011-020/031_misplaced.sql'), 'SELECT 1;\n');
    const result = versionsIn(dist);
    expect(result.status).not.toBe(0);
    expect(result.output).toContain(
      'migration file 031_misplaced.sql is in sql/011-020/; it belongs in sql/031-040/',
    );
  });
});
