import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, cpSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** The repository root, with a trailing slash. */
export const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Compiles the package into a folder of the calling test file's own and returns where its CLI is.
 * dist/ is not used: `npm run build` empties it first, and another run may be doing that while a
 * test spawns the binary.
 */
export async function buildPrivateCli(
  prefix: string,
): Promise<{ buildDir: string; bin: string; remove(): void }> {
  const buildDir = `${root}.tmp/${prefix}-${randomBytes(4).toString('hex')}`;
  mkdirSync(buildDir, { recursive: true });
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
  cpSync(`${root}src/migrations/sql`, `${buildDir}/dist/migrations/sql`, { recursive: true });
  // The CLI reads its version from the package.json above dist/.
  copyFileSync(`${root}package.json`, `${buildDir}/package.json`);
  return {
    buildDir,
    bin: `${buildDir}/dist/cli/main.js`,
    remove: () => rmSync(buildDir, { recursive: true, force: true }),
  };
}
