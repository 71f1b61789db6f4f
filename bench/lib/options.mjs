// Command-line flags of `npm run bench`. Every size is bounded so that a typo cannot start a run
// that never ends; defaults are sized for a default run of about 2–3 minutes on 2 cores.
import { parseArgs } from 'node:util';

const WORKLOADS = ['enqueue', 'many', 'process', 'latency', 'ordering', 'defaults'];

/** Flag name -> [default, smallest, largest]. */
const INTEGER_FLAGS = {
  reps: [3, 1, 20],
  'enqueue-jobs': [3000, 100, 1_000_000],
  'enqueue-callers': [16, 1, 200],
  'many-jobs': [50_000, 500, 2_000_000],
  'many-batch': [1000, 1, 10_000],
  'process-jobs': [50_000, 100, 2_000_000],
  concurrency: [16, 1, 1000],
  'raw-claim-batch': [64, 1, 1000],
  prefetch: [500, 0, 5000],
  'claim-batch-size': [0, 0, 1000],
  'latency-samples': [300, 20, 10_000],
  'latency-pause-ms': [10, 0, 1000],
  'timeout-s': [180, 5, 3600],
  'defaults-jobs': [20_000, 100, 1_000_000],
  'defaults-job-ms': [10, 1, 1000],
};

/** The prefetch values the defaults workload tries to find the best hand-tuned setting. */
const TUNED_PREFETCH_DEFAULT = '100,500,2000';

const USAGE = `Usage: npm run bench -- [flags]
  --peers                 also run pg-boss on the processing workload (graphile-worker always runs)
  --only LIST             comma-separated subset of: ${WORKLOADS.join(',')}
${Object.entries(INTEGER_FLAGS)
  .map(([name, [fallback, min, max]]) => `  --${name.padEnd(22)}default ${fallback} (${min}..${max})`)
  .join('\n')}
--prefetch sets the "Leasehold prefetch" rows (0 leaves them out); --claim-batch-size 0 keeps
Leasehold's own claimBatchSize default.
  --tuned-prefetch LIST   the defaults workload's hand-tuned candidates (default ${TUNED_PREFETCH_DEFAULT})
The defaults workload runs --defaults-jobs no-op jobs per run, and 10 ms jobs (--defaults-job-ms)
sized to about 4 s per run (at least 500), at concurrency 1, 16 and 100.
Set DATABASE_URL to use an existing server instead of an embedded one.`;

/** Parses argv (without node and script) into bench options; exits with usage on a bad flag. */
export function parseOptions(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      options: {
        peers: { type: 'boolean', default: false },
        only: { type: 'string' },
        'tuned-prefetch': { type: 'string' },
        help: { type: 'boolean', default: false },
        ...Object.fromEntries(Object.keys(INTEGER_FLAGS).map((name) => [name, { type: 'string' }])),
      },
    });
  } catch (err) {
    fail(err.message);
  }
  const { values } = parsed;
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const options = { peers: values.peers, workloads: new Set(WORKLOADS) };
  if (values.only !== undefined) {
    const chosen = values.only.split(',').map((w) => w.trim());
    const unknown = chosen.filter((w) => !WORKLOADS.includes(w));
    if (unknown.length > 0) fail(`--only: unknown workload ${unknown.join(', ')}`);
    options.workloads = new Set(chosen);
  }
  for (const [name, [fallback, min, max]] of Object.entries(INTEGER_FLAGS)) {
    const text = values[name];
    const value = text === undefined ? fallback : Number(text);
    if (!Number.isInteger(value) || value < min || value > max) {
      fail(`--${name} must be an integer from ${min} to ${max}`);
    }
    options[camelCase(name)] = value;
  }
  options.timeoutMs = options.timeoutS * 1000;
  options.tunedPrefetch = (values['tuned-prefetch'] ?? TUNED_PREFETCH_DEFAULT).split(',').map(Number);
  if (options.tunedPrefetch.some((n) => !Number.isInteger(n) || n < 1 || n > 5000)) {
    fail('--tuned-prefetch must be a comma-separated list of integers from 1 to 5000');
  }
  return options;
}

function camelCase(name) {
  return name.replace(/-([a-z])/g, (_, letter) => letter.toUpperCase());
}

function fail(message) {
  console.error(`bench: ${message}\n\n${USAGE}`);
  process.exit(2);
}
