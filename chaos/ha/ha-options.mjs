// Command-line flags of `npm run chaos:ha`. Every number is bounded, as in options.mjs, so a typo
// cannot start a run that never ends.
import { parseArgs } from 'node:util';
import { integerFlagOptions, integerFlagUsage, readIntegerFlags } from '../records/bounded-flags.mjs';

/** Flag name -> [default, smallest, largest]. */
const INTEGER_FLAGS = {
  jobs: [200_000, 500, 2_000_000],
  'duration-s': [600, 20, 7200],
  failovers: [5, 1, 20],
  'worker-hosts': [2, 2, 8],
  concurrency: [16, 1, 200],
  'lease-ms': [5000, 500, 60_000],
  'sweep-ms': [1000, 100, 10_000],
  'max-attempts': [25, 1, 1000],
  'drain-timeout-s': [600, 10, 3600],
  'tolerance-ms': [500, 0, 10_000],
  // A link cut lasts this long (the old primary's manager fences it meanwhile).
  'cut-s': [20, 5, 300],
  // The worker host partitioned from the new primary during one failover: for this long.
  'partition-s': [15, 1, 300],
  // Patroni's maximum_lag_on_failover (async): a replica further behind is not promoted.
  'lag-bytes': [1_048_576, 0, 2 ** 31 - 1],
  seed: [1, 0, 2 ** 31 - 1],
  'counter-pct': [10, 0, 100],
};
const MANAGERS = ['patroni', 'pg_auto_failover'];
const MODES = ['sync', 'async'];

export const HA_USAGE = `Usage: npm run chaos:ha -- --manager patroni|pg_auto_failover --mode sync|async [flags]
  --manager NAME          patroni (with etcd) or pg_auto_failover (with its monitor)
  --mode MODE             sync: the manager's synchronous mode (a commit waits for a standby, only
                          an in-sync standby is promoted); async: no synchronous standby
  --smoke                 a small run: 3,000 jobs over 300 s, 5 failovers (the system suite's size)
  --json PATH             also write the measures and the verdict as JSON
${integerFlagUsage(INTEGER_FLAGS, 22)}
As root. Builds network namespaces (a switch, the rig and ledger, the manager's etcd or monitor,
three PostgreSQL nodes, --worker-hosts worker hosts), installs the Debian packages it needs with
apt-get when they are missing, starts the cluster under its manager, runs the chaos producer and a
worker process per host on the multi-host URL with target_session_attrs=read-write, and fails the
primary --failovers times: SIGKILL of the primary's node (postmaster and agent) and a cut of its
link, in turn, the manager failing over and fencing by itself; the old primary rejoins as a
standby (pg_rewind where the manager does it). During the third failover one worker host is cut
off from the new primary for --partition-s. The queue drains, the ledger (kept outside the
cluster) is copied to the last primary, split into what it knows and what was lost, and the chaos
checker judges it. Exit code: 0 every invariant held, 1 one broke, 2 the rig failed.`;

/** Parses argv (without node and script) into options, or { error } / { help }. */
export function parseHaOptions(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      options: {
        manager: { type: 'string' },
        mode: { type: 'string' },
        json: { type: 'string' },
        smoke: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
        ...integerFlagOptions(INTEGER_FLAGS),
      },
    });
  } catch (err) {
    return { error: err.message };
  }
  const { values } = parsed;
  if (values.help) return { help: true };
  if (!MANAGERS.includes(values.manager)) return { error: '--manager must be patroni or pg_auto_failover' };
  if (!MODES.includes(values.mode)) return { error: '--mode must be sync or async' };
  const options = {
    manager: values.manager,
    mode: values.mode,
    json: values.json ?? null,
    smoke: values.smoke,
  };
  if (values.smoke) {
    values.jobs ??= '3000';
    // Long enough for five failovers to happen while jobs still arrive.
    values['duration-s'] ??= '300';
    values['cut-s'] ??= '12';
    values['partition-s'] ??= '8';
  }
  const flagError = readIntegerFlags(INTEGER_FLAGS, values, options);
  if (flagError) return { error: flagError };
  return options;
}
