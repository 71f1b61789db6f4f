// The migrator reads numbered .sql files next to its compiled module; tsc does not copy them.
import { chmodSync, cpSync } from 'node:fs';

cpSync('src/migrations/sql', 'dist/migrations/sql', { recursive: true });
chmodSync('dist/cli/main.js', 0o755);
