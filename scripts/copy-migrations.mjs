// The migrator reads numbered .sql files next to its compiled module, and the dashboard serves its
// scripts and styles from beside its own: tsc copies neither. `node scripts/copy-migrations.mjs
// [outDir]` (default dist): test/support/cli-build.ts runs it for its private builds too, so a
// build made there serves the same files as the package.
import { chmodSync, cpSync } from 'node:fs';

const out = process.argv[2] ?? 'dist';
cpSync('src/migrations/sql', `${out}/migrations/sql`, { recursive: true });
cpSync('src/dashboard/assets', `${out}/dashboard/assets`, { recursive: true });
chmodSync(`${out}/cli/main.js`, 0o755);
