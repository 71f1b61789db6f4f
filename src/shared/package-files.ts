// Files the package ships beside its code (the migrations' SQL, the dashboard's assets, the demo's
// worker script, package.json), found from wherever the code that asks was loaded. Three layouts
// run this: the sources under Vitest (src/), tsc's output (dist/, one file per module) and the
// published bundle (scripts/bundle.mjs), where every module's code lives in a shared chunk under
// dist/chunks/ or inlined into an entry file, so `new URL('../x', import.meta.url)` in each module
// would point elsewhere there. The base is the innermost src/ or dist/ folder on this module's path.
import { fileURLToPath } from 'node:url';

const here = import.meta.url;
const at = Math.max(here.lastIndexOf('/dist/'), here.lastIndexOf('/src/'));
// The folder that holds the modules' tree: src/ or dist/ (this module's own folder if neither).
const base = at >= 0 ? here.slice(0, here.indexOf('/', at + 1) + 1) : new URL('./', here).href;

/** The URL of a file shipped with the package, by its path from the top of src/ (or dist/). */
export function packageFileUrl(path: string): URL {
  return new URL(path, base);
}

/** The file-system path of a file shipped with the package, by its path from the top of src/. */
export function packageFilePath(path: string): string {
  return fileURLToPath(packageFileUrl(path));
}
