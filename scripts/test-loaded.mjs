#!/usr/bin/env node
// `npm run test:loaded [-- vitest arguments]`: the suite (or the files named) with CPU-bound
// processes beside it, one per core (two on the 2-core machine), for the run's whole length. A
// user's laptop or a shared CI runner is busy: a test that passes only on an idle machine is a test
// that will be skipped or ignored, so .ci/run runs this for the rooms where timing matters.
//
//   npm run test:loaded                                 the whole `npm test` suite
//   npm run test:loaded -- test/runtime test/maintenance only those (any vitest arguments)
//   LEASEHOLD_LOAD_PROCESSES=3 npm run test:loaded      another number of burners
//
// Exits with vitest's status. The burners are this script's children: they end with it (and each
// checks every few milliseconds that its parent is alive, so a killed run leaves none behind).
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const requested = process.env.LEASEHOLD_LOAD_PROCESSES;
const count = requested === undefined ? Math.max(2, availableParallelism()) : Number(requested);
if (!Number.isInteger(count) || count < 0 || count > 64) {
  console.error(`test:loaded: LEASEHOLD_LOAD_PROCESSES must be an integer from 0 to 64 (got ${requested})`);
  process.exit(2);
}

// Spins, and leaves once its parent is gone (process.ppid changes when it is re-parented).
const BURN = `const parent = ${process.pid};
for (;;) {
  const until = Date.now() + 20;
  while (Date.now() < until) {}
  if (process.ppid !== parent) process.exit(0);
}`;
const burners = Array.from({ length: count }, () =>
  spawn(process.execPath, ['-e', BURN], { stdio: 'ignore' }),
);
const stopBurners = () => {
  for (const burner of burners)
    if (burner.exitCode === null && burner.signalCode === null) burner.kill('SIGKILL');
};
console.log(
  `test:loaded: ${count} CPU-bound processes (${burners.map((b) => b.pid).join(', ')}) beside vitest`,
);

const vitest = spawn(
  process.execPath,
  [`${root}node_modules/vitest/vitest.mjs`, 'run', ...process.argv.slice(2)],
  {
    cwd: root,
    stdio: 'inherit',
    env: process.env,
  },
);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    vitest.kill(signal);
    stopBurners();
  });
}
vitest.on('exit', (code, signal) => {
  stopBurners();
  process.exitCode = code ?? (signal ? 1 : 0);
});
