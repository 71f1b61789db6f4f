// `npm run bench:import [-- --runs N]`: what `import('leasehold')` costs a cold process (a
// producer's serverless cold start), against pg-boss and graphile-worker (bench/node_modules) and
// `pg` alone. Each run is a new `node` process that imports one package and prints its own CPU
// time (user + system since the process started); the packages take turns within each round so
// that load from elsewhere falls on all of them alike. Medians, and each as a ratio to pg-boss.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '21' } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1 || runs > 1000)
  throw new Error('--runs: a whole number from 1 to 1000');

const root = new URL('..', import.meta.url);
const fromBench = createRequire(new URL('./bench/package.json', root));
const fromRoot = createRequire(new URL('./package.json', root));
/** What each process imports: a file URL, or null for an empty process. */
const targets = {
  'node (no import)': null,
  pg: fromRoot.resolve('pg'),
  leasehold: new URL('./dist/index.js', root).href,
  'pg-boss': fromBench.resolve('pg-boss'),
  'graphile-worker': fromBench.resolve('graphile-worker'),
};

function cpuMs(target) {
  const load = target
    ? `await import(${JSON.stringify(target.startsWith('file:') ? target : `file://${target}`)});`
    : '';
  const code = `${load} const u = process.cpuUsage(); console.log((u.user + u.system) / 1000);`;
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`importing ${target} failed:\n${run.stderr}`);
  return Number(run.stdout.trim());
}

const times = Object.fromEntries(Object.keys(targets).map((name) => [name, []]));
for (let round = 0; round < runs; round++) {
  for (const [name, target] of Object.entries(targets)) times[name].push(cpuMs(target));
}
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const boss = median(times['pg-boss']);
console.log(`import CPU per cold process, median of ${runs} paired rounds (Node ${process.version})`);
console.log('| import | CPU ms | vs pg-boss |\n| --- | --: | --: |');
for (const name of Object.keys(targets)) {
  const ms = median(times[name]);
  console.log(`| ${name} | ${ms.toFixed(1)} | ${(ms / boss).toFixed(2)}× |`);
}
