import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { packageFileUrl } from '../shared/package-files.js';

/** A file the dashboard serves under `/assets/`. */
export interface StaticAsset {
  body: Buffer;
  type: string;
}

// The page's own scripts and styles sit beside this module (src/dashboard/assets, copied to
// dist/dashboard/assets by the build, which bundles uPlot's two files there too); run from the
// sources (the tests), uPlot's files come from the uplot devDependency. Read once at start: no request reads the disk, and nothing is fetched
// from anywhere but this server.
const OWN = [
  'app.js',
  'dom.js',
  'overview.js',
  'queue.js',
  'queue-table.js',
  'sparkline.js',
  'charts.js',
  'search.js',
  'bulk.js',
  'job.js',
  'flow.js',
  'enqueue.js',
  'app.css',
];

function typeOf(name: string): string {
  return name.endsWith('.css') ? 'text/css; charset=utf-8' : 'text/javascript; charset=utf-8';
}

/** Loads every asset the page uses, by the name it is served under. */
export function loadAssets(): ReadonlyMap<string, StaticAsset> {
  const assets = new Map<string, StaticAsset>();
  for (const name of OWN) {
    assets.set(name, {
      body: readFileSync(packageFileUrl(`dashboard/assets/${name}`)),
      type: typeOf(name),
    });
  }
  const require = createRequire(import.meta.url);
  for (const [served, file] of [
    ['uPlot.iife.min.js', 'uplot/dist/uPlot.iife.min.js'],
    ['uPlot.min.css', 'uplot/dist/uPlot.min.css'],
  ] as const) {
    const bundled = packageFileUrl(`dashboard/assets/${served}`);
    const body = readFileSync(existsSync(bundled) ? bundled : require.resolve(file));
    assets.set(served, { body, type: typeOf(served) });
  }
  return assets;
}
