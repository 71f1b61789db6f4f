// Command-line flags of `npm run chaos`. Every number is bounded, so a typo cannot start a run
// that never ends.
import { parseArgs } from 'node:util';
import { FAULT_KINDS } from '../faults/faults.mjs';
import { integerFlagOptions, integerFlagUsage, readIntegerFlags } from './bounded-flags.mjs';

/** Flag name -> [default, smallest, largest]. */
const INTEGER_FLAGS = {
  jobs: [20_000, 100, 2_000_000],
  'duration-s': [90, 10, 3600],
  workers: [4, 2, 12],
  concurrency: [12, 1, 200],
  'lease-ms': [3000, 500, 60_000],
  'sweep-ms': [500, 100, 10_000],
  'pin-s': [60, 1, 1800],
  'gap-ms': [1500, 0, 60_000],
  'max-attempts': [25, 1, 1000],
  'drain-timeout-s': [180, 10, 3600],
  'tolerance-ms': [250, 0, 10_000],
  seed: [1, 0, 2 ** 31 - 1],
  // Percent of the worker's plain jobs that bump a per-job counter in job.transaction instead.
  'counter-pct': [10, 0, 100],
  // The rate-limited-queue mode (chaos/harness/rate-limits.mjs): a backlog of this many jobs (0: off) on a
  // queue limited to --rate-max starts per --rate-per-ms and --limited-concurrency live leases.
  'limited-jobs': [0, 0, 100_000],
  'rate-max': [5, 1, 1000],
  'rate-per-ms': [200, 10, 60_000],
  'limited-concurrency': [3, 1, 100],
  // Percent of the produced units that are flows (a diamond, or 1 -> 8 -> 1) instead of single jobs.
  'flow-pct': [0, 0, 100],
  // The batch workload: the workers' `chaos` queue runs a batch handler of up to this many jobs (0: off).
  'batch-size': [0, 0, 200],
  // The steps workload: every produced job is a workflow of this many durable steps (0: off).
  steps: [0, 0, 50],
  // With --steps: percent of the workflows that wait for an event (sent before, after, or never).
  'event-pct': [30, 0, 100],
};

const USAGE = `Usage: npm run chaos -- [flags]
  --faults LIST           comma-separated subset of: ${FAULT_KINDS.join(',')} (default: all)
  --json PATH             also write the measures and the verdict as JSON
${integerFlagUsage(INTEGER_FLAGS, 22)}
Jobs are enqueued evenly over --duration-s; faults run one scheduled round, then at random
until the last job is enqueued. With 'skew' two of the workers run with their clock 10 minutes
ahead and behind. The harness always starts its own PostgreSQL (it must crash and restart it);
DATABASE_URL is ignored. --counter-pct 100 makes every worker job (all but the
hand-completed and effects-ledger ones) bump its own counter row in job.transaction: the checker
then proves the counter total equals the number of those jobs, each row bumped exactly once.
--limited-jobs N adds a backlog of N jobs on a rate- and concurrency-limited queue (its own schema,
served by every worker): the checker then proves no --rate-per-ms window held more than --rate-max
starts (claims, and handler starts), the limit was reached, and no more than --limited-concurrency
leases were live or handlers ran at once (a handler past its lease excepted).
--flow-pct N makes N% of the produced units flows (lh.enqueueFlow: a diamond, or 1 -> 8 -> 1):
the checker then also proves every child ran after all its parents succeeded.
--batch-size N serves the workers' queue with a batch handler of up to N jobs (at most
--concurrency): each job's work runs side by side in one call, a job whose run failed is settled
alone (job.fail), the counter bumps of a batch commit in one job.transaction with every completion
of the batch, and the rest complete together; every invariant is judged as for single handlers.
--steps N makes every produced job a workflow of N durable steps (job.step), half of them with a
short job.sleep halfway, each step's side effect written to the ledger with the claim that ran it
and the value the step records: the checker then proves each recorded step's value is in exactly one
effect run (by the recording claim), no later claim ran a recorded step again, every succeeded
workflow recorded all its steps, and no step or sleep was recorded by a stale lease.
--event-pct N (with --steps; default 30) makes N% of the workflows wait for an event
(job.waitForEvent) before their last step; the producer sends a third of those events before the
workflow is enqueued, a third 0.2 to 3 s after, and never sends the rest (their wait times out):
the checker then proves every wait ended woken or timed out, an event sent before a wait began
woke it, a never-sent one woke nothing, each woken wait holds its own event's payload, and no
woken workflow ran a recorded step again. Exit code: 0 every invariant held, 1 one broke, 2 the harness failed.`;

/** Parses argv (without node and script) into options; exits with usage on a bad flag. */
export function parseOptions(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      strict: true,
      options: {
        faults: { type: 'string' },
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
  const options = { json: values.json ?? null, faults: new Set(FAULT_KINDS) };
  if (values.faults !== undefined && values.faults !== 'all') {
    const chosen = values.faults
      .split(',')
      .map((f) => f.trim())
      .filter(Boolean);
    const unknown = chosen.filter((f) => !FAULT_KINDS.includes(f));
    if (unknown.length > 0) fail(`--faults: unknown fault ${unknown.join(', ')}`);
    options.faults = new Set(chosen);
  }
  const flagError = readIntegerFlags(INTEGER_FLAGS, values, options);
  if (flagError) fail(flagError);
  if (options.steps > 0 && (options.batchSize > 0 || options.flowPct > 0)) {
    fail('--steps runs workflows alone: not with --batch-size (a batch refuses job.sleep) or --flow-pct');
  }
  if (options.faults.has('skew') && options.workers < 3) fail('--faults skew needs --workers 3 or more');
  return options;
}

function fail(message) {
  console.error(`chaos: ${message}\n\n${USAGE}`);
  process.exit(2);
}
