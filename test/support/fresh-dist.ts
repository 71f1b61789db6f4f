import { type Dirent, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The newest file under `dir` (mtime in ms and path), or null for an empty or missing folder. */
function extreme(dir: string, pick: (a: number, b: number) => boolean): { at: number; path: string } | null {
  let found: { at: number; path: string } | null = null;
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { recursive: true, withFileTypes: true });
  } catch {
    return null;
  }
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const at = statSync(path).mtimeMs;
    if (found === null || pick(at, found.at)) found = { at, path };
  }
  return found;
}

/**
 * Throws unless every file of `distDir` was written after every file of `srcDir` changed: a test
 * that runs the built package (README examples, the chaos smoke run) must not test stale code
 * when run alone after an edit. `npm test` builds first; `npx vitest run` of one file does not,
 * and building here would empty dist/ under another test file that is running it.
 */
export function assertFreshDist(srcDir = join(root, 'src'), distDir = join(root, 'dist')): void {
  const oldestBuilt = extreme(distDir, (a, b) => a < b);
  if (oldestBuilt === null) throw new Error(`${distDir} is missing: run \`npm run build\` first`);
  const newestSource = extreme(srcDir, (a, b) => a > b);
  if (newestSource !== null && newestSource.at > oldestBuilt.at) {
    throw new Error(
      `${distDir} is older than ${newestSource.path}: run \`npm run build\` (npm test does) before this file`,
    );
  }
}
