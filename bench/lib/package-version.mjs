// The installed version of a peer package, for the table (its package.json may not be exported).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export function installedVersion(name) {
  let dir = dirname(fileURLToPath(import.meta.resolve(name)));
  for (let depth = 0; depth < 6; depth++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
      if (pkg.name === name) return pkg.version;
    } catch {
      // no package.json at this level: keep walking up
    }
    dir = dirname(dir);
  }
  return 'unknown version';
}
