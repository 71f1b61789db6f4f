// Before `npm run bench`: installs the peer queues of bench/package.json (graphile-worker, which
// every bench run compares with, pg-boss for --peers, BullMQ for the 1-by-1 enqueue on Redis) into bench/node_modules, from its
// lockfile, once. They are not the project's dependencies: they want Node >= 22 and only the bench
// needs them (issue 37); on Node 20 npm warns and they run.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const bench = fileURLToPath(new URL('.', import.meta.url));
const installed = ['graphile-worker', 'pg-boss', 'bullmq', 'ioredis'].every((name) =>
  existsSync(new URL(`./node_modules/${name}/package.json`, import.meta.url)),
);
if (!installed) {
  console.error('bench: installing the peer queues of bench/package.json into bench/node_modules');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: bench,
    stdio: 'inherit',
  });
}
