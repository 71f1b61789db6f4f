// Command-line flags of `npm run chaos:hosts`. Every number is bounded, so a typo cannot start a
// run that never ends or a network that cannot be built.
import { parseArgs } from 'node:util';
import { integerFlagOptions, integerFlagUsage, readIntegerFlags } from './bounded-flags.mjs';

/** Flag name -> [default, smallest, largest]. */
export const HOSTS_FLAGS = {
  hosts: [3, 2, 8],
  // Jobs of the fault-free phase, and as many again in the faulted phase.
  jobs: [100_000, 1000, 2_000_000],
  // Jobs of the latency phase (library defaults, one host 50 ms further away), plus its long jobs.
  'latency-jobs': [5000, 0, 200_000],
  'long-jobs': [12, 0, 200],
  // How long each long job runs: longer than the library's default lease (30 s), so that every
  // one of them must renew (every 10 s at the defaults) to finish.
  'long-job-s': [35, 31, 600],
  'workers-per-host': [1, 1, 4],
  concurrency: [16, 1, 200],
  // Each phase's jobs are enqueued over this long: faster than the workers finish them, so that
  // every phase runs from a backlog and measures capacity, not the producer's pace.
  'produce-s': [40, 5, 3600],
  'lease-ms': [3000, 500, 60_000],
  'sweep-ms': [500, 100, 10_000],
  // The faulted phase: host 1's link is cut this many times, each cut for --cut-ms (0: twice the
  // lease plus a second), with --cut-gap-ms between cuts; between cuts it sees the delay, jitter
  // and loss below.
  cuts: [3, 1, 50],
  'cut-ms': [0, 0, 120_000],
  'cut-gap-ms': [8000, 1000, 120_000],
  'faulty-rtt-ms': [20, 0, 2000],
  'faulty-jitter-ms': [5, 0, 1000],
  'faulty-loss-pct': [2, 0, 30],
  // The latency phase: host 2's added round-trip time.
  'latency-rtt-ms': [50, 0, 2000],
  'max-attempts': [25, 1, 1000],
  'drain-timeout-s': [300, 10, 3600],
  'tolerance-ms': [250, 0, 10_000],
  // Healthy hosts' completion rate in the faulted phase, as a percentage of the fault-free one.
  'min-throughput-pct': [80, 1, 100],
  seed: [1, 0, 2 ** 31 - 1],
};

/** The phases, in the order they run. */
export const HOSTS_PHASES = ['fault-free', 'faulted', 'latency'];

export const HOSTS_USAGE = `Usage: npm run chaos:hosts -- [flags]     (needs root: network namespaces)
  --json PATH                 also write the measures and the verdict as JSON
  --phases LIST               which phases to run, comma-separated (default ${HOSTS_PHASES.join(',')})
${integerFlagUsage(HOSTS_FLAGS, 26)}
PostgreSQL runs in network namespace lhh-db, worker host i in lhh-h<i>, joined by its own veth pair
(10.231.<i>.1 database side, 10.231.<i>.2 host side). Three phases: fault-free (--jobs), faulted
(--jobs: host 1's link cut --cuts times for longer than its leases, with delay, jitter and loss
between cuts), latency (--latency-jobs plus --long-jobs that renew, library default lease and
renewal settings, host 2 --latency-rtt-ms further away; the long jobs go to a queue only host 2
serves, so every renewal of theirs crosses the delayed link). Exit code: 0 every invariant held, 1 one
broke, 2 the harness failed (or not root, or nft/ip missing).`;

/** Parses argv (without node and script); returns options, or { error } with a message. */
export function parseHostsOptions(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      options: {
        json: { type: 'string' },
        phases: { type: 'string' },
        help: { type: 'boolean', default: false },
        ...integerFlagOptions(HOSTS_FLAGS),
      },
    });
  } catch (err) {
    return { error: err.message };
  }
  const { values } = parsed;
  if (values.help) return { help: true };
  const options = { json: values.json ?? null };
  const phases = (values.phases ?? HOSTS_PHASES.join(','))
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = phases.filter((name) => !HOSTS_PHASES.includes(name));
  if (unknown.length > 0 || phases.length === 0)
    return { error: `--phases takes a comma-separated list of ${HOSTS_PHASES.join(', ')}` };
  // Always in the order of HOSTS_PHASES, each once, whatever order they were named in.
  options.phases = HOSTS_PHASES.filter((name) => phases.includes(name));
  const flagError = readIntegerFlags(HOSTS_FLAGS, values, options);
  if (flagError) return { error: flagError };
  if (options.phases.includes('latency') && options.longJobs === 0)
    return {
      error:
        'the latency phase needs --long-jobs above 0: its renewals are what it checks (to skip it: --phases fault-free,faulted)',
    };
  if (options.cutMs === 0) options.cutMs = 2 * options.leaseMs + 1000;
  if (options.cutMs <= options.leaseMs + options.sweepMs)
    return {
      error: '--cut-ms must be longer than --lease-ms plus --sweep-ms (a cut must outlast the leases)',
    };
  return options;
}
