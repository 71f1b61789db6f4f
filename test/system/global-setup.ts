import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * The system suite needs software that only system packages provide; it refuses to start without
 * it instead of skipping, so a green run always means the tests ran. The requirements live in one
 * place, the script `npm run test:system` runs before Vitest (scripts/require-system-packages.mjs).
 */
export default function requireSystemPackages(): void {
  const script = fileURLToPath(new URL('../../scripts/require-system-packages.mjs', import.meta.url));
  const check = spawnSync(process.execPath, [script], { encoding: 'utf8' });
  if (check.status !== 0)
    throw new Error(check.stderr.trim() || 'the system suite is missing a system package');
}
