// Command-line flags of `npm run chaos:failover`. Every number is bounded, as in options.mjs, so a
// typo cannot start a run that never ends.
import { parseArgs } from 'node:util';
import { integerFlagOptions, integerFlagUsage, readIntegerFlags } from './bounded-flags.mjs';

/** Flag name -> [default, smallest, largest]. */
const INTEGER_FLAGS = {
  jobs: [50_000, 1000, 2_000_000],
  'duration-s': [100, 10, 3600],
  workers: [3, 1, 12],
  concurrency: [12, 1, 200],
  'lease-ms': [3000, 500, 60_000],
  'sweep-ms': [500, 100, 10_000],
  // The primary is killed once this many completions were acknowledged (default: half the jobs).
  'kill-after': [0, 0, 2_000_000],
  'max-attempts': [25, 1, 1000],
  'drain-timeout-s': [300, 10, 3600],
  'tolerance-ms': [250, 0, 10_000],
  // Lost acknowledgments (async) must lie within this many ms before the kill: the lag window.
  'lag-window-ms': [5000, 0, 600_000],
  seed: [1, 0, 2 ** 31 - 1],
  'counter-pct': [10, 0, 100],
};
const MODES = ['sync', 'async'];

const USAGE = `Usage: npm run chaos:failover -- --mode sync|async [flags]
  --mode MODE             sync: synchronous_standby_names names the standby, synchronous_commit on;
                          async: synchronous_standby_names empty (required)
  --json PATH             also write the measures and the verdict as JSON
${integerFlagUsage(INTEGER_FLAGS, 22)}
Starts a primary, a streaming standby (a cold copy of the primary) and a third small server for
the ledger; producers and worker processes connect with the host list
127.0.0.1:primary,127.0.0.1:standby and target_session_attrs=read-write. Once --kill-after
completions were acknowledged (0: half of --jobs), the primary's postmaster and every backend get
SIGKILL, the standby is promoted (sync: its inherited synchronous_standby_names cleared), the
workers move, the queue drains, the ledger is copied to the new primary and the chaos checker
judges it. Exit code: 0 every invariant held, 1 one broke, 2 the rig failed.`;

/** Parses argv (without node and script) into options; exits with usage on a bad flag. */
export function parseFailoverOptions(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      options: {
        mode: { type: 'string' },
        json: { type: 'string' },
        help: { type: 'boolean', default: false },
        ...integerFlagOptions(INTEGER_FLAGS),
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
  if (!MODES.includes(values.mode)) fail('--mode must be sync or async');
  const options = { mode: values.mode, json: values.json ?? null };
  const flagError = readIntegerFlags(INTEGER_FLAGS, values, options);
  if (flagError) fail(flagError);
  if (options.killAfter === 0) options.killAfter = Math.floor(options.jobs / 2);
  if (options.killAfter >= options.jobs) fail('--kill-after must be below --jobs');
  return options;
}

function fail(message) {
  console.error(`chaos:failover: ${message}\n\n${USAGE}`);
  process.exit(2);
}
