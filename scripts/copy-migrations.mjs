// The migrator reads numbered .sql files next to its compiled module, and the dashboard serves its
// scripts and styles from beside its own: tsc copies neither.
import { chmodSync, cpSync } from 'node:fs';

cpSync('src/migrations/sql', 'dist/migrations/sql', { recursive: true });
cpSync('src/dashboard/assets', 'dist/dashboard/assets', { recursive: true });
chmodSync('dist/cli/main.js', 0o755);
