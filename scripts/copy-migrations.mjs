// The migrator reads numbered .sql files next to its compiled module, and the dashboard serves its
// scripts and styles from beside its own: tsc copies neither. uPlot (the dashboard's charts, a
// devDependency) is bundled here into the dashboard's assets, so the package needs no browser
// library at run time. `node scripts/copy-migrations.mjs
// [outDir]` (default dist): test/support/cli-build.ts runs it for its private builds too, so a
// build made there serves the same files as the package.
import { chmodSync, cpSync } from 'node:fs';
import { createRequire } from 'node:module';

const out = process.argv[2] ?? 'dist';
cpSync('src/migrations/sql', `${out}/migrations/sql`, { recursive: true });
cpSync('src/dashboard/assets', `${out}/dashboard/assets`, { recursive: true });
const require = createRequire(import.meta.url);
for (const name of ['uPlot.iife.min.js', 'uPlot.min.css']) {
  cpSync(require.resolve(`uplot/dist/${name}`), `${out}/dashboard/assets/${name}`);
}
chmodSync(`${out}/cli/main.js`, 0o755);
