// `npm test`, `npm run demo` and the other run scripts build first so that they never run stale
// code: `npm ci` builds nothing (the package builds in prepack, so that installing it runs no
// script), and after a previous run a build would repeat a whole tsc run for nothing. This runs
// `npm run build` only when dist/ is missing or some source,
// tsconfig or package.json changed after dist/'s oldest file was written. (A deleted source leaves
// its compiled file in dist/ until the next full build; nothing imports it.)
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The mtimes of the files under `path` (or of `path` itself), or [] when it does not exist. */
function mtimes(path) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return [];
  }
  if (!stat.isDirectory()) return [stat.mtimeMs];
  return readdirSync(path, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => statSync(join(entry.parentPath, entry.name)).mtimeMs);
}

const built = mtimes('dist');
const sources = [
  'src',
  'tsconfig.json',
  'tsconfig.build.json',
  'package.json',
  'scripts/copy-migrations.mjs',
].flatMap(mtimes);
const stale = built.length === 0 || Math.max(...sources) > Math.min(...built);
if (stale) execFileSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit' });
