// Bundles tsc's output into the files the package publishes: each entry point (the package's
// exports, its CLI, the demo's worker script) becomes a small file over shared chunks in
// dist/chunks/, so that `import 'leasehold'` reads a handful of files instead of a hundred
// (module loading was most of the import's cost; docs/architecture.md, "What the package ships").
// Shared chunks keep one copy of every module across entry points, so `instanceof LeaseholdError`
// holds between `leasehold` and `leasehold/testing`. Modules loaded on first use (the dashboard,
// operator calls, the embedded server...) stay in chunks of their own, loaded by their `import()`.
// Packages stay external: pg and the optional peers are resolved from the app's node_modules.
// Runs after tsc (it reads dist/*.js, so the code is compiled once, by tsc) and rewrites the entry
// files in place; the rest of tsc's output stays for the repository's own tools (bench/, chaos/,
// scripts/) and is not published (package.json "files"). dist/bundle-meta.json maps each output to
// the modules in it, for test/interfaces/import-footprint.test.ts.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { build } from 'esbuild';

const out = process.argv[2] ?? 'dist';
const manifest = JSON.parse(readFileSync('package.json', 'utf8'));

// The published entry points, from the manifest itself, plus the demo's worker, which the demo
// starts as a process of its own by path.
const entries = new Set(['demo/worker-process.js']);
for (const target of Object.values(manifest.exports)) entries.add(target.import.replace(/^\.\/dist\//, ''));
for (const bin of Object.values(manifest.bin)) entries.add(bin.replace(/^\.\/dist\//, ''));

rmSync(`${out}/chunks`, { recursive: true, force: true });
const result = await build({
  entryPoints: [...entries].map((entry) => `${out}/${entry}`),
  outdir: out,
  outbase: out,
  entryNames: '[dir]/[name]',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  allowOverwrite: true,
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});

// Output → the tsc modules in it (paths as dist/..., as the import-footprint test lists them).
const meta = {};
for (const [file, output] of Object.entries(result.metafile.outputs)) {
  meta[file] = Object.keys(output.inputs).sort();
}
writeFileSync(`${out}/bundle-meta.json`, `${JSON.stringify(meta, null, 2)}\n`);
