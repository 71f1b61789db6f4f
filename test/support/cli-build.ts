import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll } from 'vitest';
import { watchOutput } from './child-output.js';
import { assertFreshDist } from './fresh-dist.js';

/** The repository root, with a trailing slash. */
export const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Puts a build of the package in a folder of the calling test file's own and returns where its CLI
 * is. dist/ is not run in place: `npm run build` empties it first, and another run may be doing
 * that while a test spawns the binary. A dist/ newer than every source (as `npm test` leaves it) is
 * copied, which takes milliseconds; otherwise the package is compiled there (a tsc run of its own,
 * which four files paid in every pass when it was always done).
 */
export async function buildPrivateCli(
  prefix: string,
): Promise<{ buildDir: string; bin: string; remove(): void }> {
  const buildDir = `${root}.tmp/${prefix}-${randomBytes(4).toString('hex')}`;
  mkdirSync(buildDir, { recursive: true });
  if (!copyFreshDist(`${buildDir}/dist`)) await compileInto(buildDir);
  // The CLI reads its version from the package.json above dist/.
  copyFileSync(`${root}package.json`, `${buildDir}/package.json`);
  return {
    buildDir,
    bin: `${buildDir}/dist/cli/main.js`,
    remove: () => rmSync(buildDir, { recursive: true, force: true }),
  };
}

// Copies dist/ to `to` when it is newer than every source and whole (its CLI, the migrations'
// SQL and the dashboard's assets there); false when it is not, or was emptied meanwhile.
function copyFreshDist(to: string): boolean {
  try {
    assertFreshDist();
    cpSync(`${root}dist`, to, { recursive: true });
  } catch {
    return false;
  }
  return ['cli/main.js', 'migrations/sql', 'dashboard/assets'].every((part) => existsSync(`${to}/${part}`));
}

async function compileInto(buildDir: string): Promise<void> {
  rmSync(`${buildDir}/dist`, { recursive: true, force: true });
  await promisify(execFile)(
    process.execPath,
    [
      `${root}node_modules/typescript/bin/tsc`,
      '-p',
      `${root}tsconfig.build.json`,
      '--outDir',
      `${buildDir}/dist`,
    ],
    { cwd: root },
  );
  // What tsc does not copy (the migrations' SQL, the dashboard's scripts and styles), copied by the
  // package build's own step: a build made here without the assets had a CLI dashboard that failed
  // to start (loadAssets found no app.js), seen only as the test's wait for it timing out.
  await promisify(execFile)(process.execPath, [`${root}scripts/copy-migrations.mjs`, `${buildDir}/dist`], {
    cwd: root,
  });
}

/**
 * For the enclosing describe (or file): builds a private CLI before its tests, and after them kills
 * whatever it started and removes the build. `start` runs it as startBuiltCli does.
 */
export function usePrivateCli(prefix: string): {
  start(args: string[]): ReturnType<typeof startBuiltCli>;
} {
  let build: Awaited<ReturnType<typeof buildPrivateCli>> | null = null;
  const children = new Set<ChildProcess>();
  beforeAll(async () => {
    build = await buildPrivateCli(prefix);
  }, 120_000);
  afterAll(() => {
    for (const child of children) child.kill('SIGKILL');
    build?.remove();
  });
  return {
    start(args) {
      if (!build) throw new Error('usePrivateCli: the CLI is not built yet (call start inside a test)');
      return startBuiltCli(build.bin, args, children);
    },
  };
}

/** What a run of the built CLI printed, and how it exited. */
export interface CliProcessResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Starts the built CLI at `bin` with `args` (without DATABASE_URL, so only flags choose the server),
 * tracked in `children` until it exits so a file can kill what is left at its end.
 */
export function startBuiltCli(
  bin: string,
  args: string[],
  children: Set<ChildProcess>,
): { child: ChildProcess; stderr: () => string; exited: Promise<CliProcessResult> } {
  const { DATABASE_URL: _ignored, ...env } = process.env;
  const child = spawn(process.execPath, [bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const output = watchOutput(child, `leasehold ${args.join(' ')}`);
  const exited = output.exited.then(({ code, stdout, stderr }) => {
    children.delete(child);
    return { code, stdout, stderr };
  });
  return { child, stderr: output.stderr, exited };
}
