import { Command, InvalidArgumentError } from 'commander';
import { createProgressDisplay } from '../../demo/progress.js';
import { formatReport } from '../../demo/report.js';
import { runDemo } from '../../demo/run-demo.js';
import { DEMO_SETTINGS } from '../../demo/settings.js';
import { addConnectionOptions, type ConnectionFlags, givenDatabaseUrl, withDatabase } from '../connection.js';
import type { Interrupt } from '../interrupt.js';
import { note } from '../log.js';

interface DemoFlags extends ConnectionFlags {
  jobs: number;
  timeout: number;
  json?: boolean;
}

// Cleanup after the deadline is bounded step by step; this is the last resort if one still hangs.
const CLEANUP_GRACE_MS = 30_000;

/** `leasehold demo`: three workers, one killed and one paused, and no job lost. */
export function demoCommand(interrupt: Interrupt): Command {
  const command = new Command('demo')
    .description(
      'enqueue jobs, run three worker processes, SIGKILL one and SIGSTOP another past its lease, and show that every job still succeeds',
    )
    .option('--jobs <n>', 'jobs to enqueue', integerFrom(300, 100_000), DEMO_SETTINGS.jobs)
    .option(
      '--timeout <seconds>',
      'give up (exit 1) after this long',
      integerFrom(10, 3600),
      DEMO_SETTINGS.timeoutMs / 1000,
    )
    .option('--json', 'print the summary as JSON on stdout');
  addConnectionOptions(command, { schema: false, embedded: 'default' });
  command.addHelpText(
    'after',
    `
With --database-url (or DATABASE_URL) the demo works in a fresh schema leasehold_demo_<random>,
dropped at the end; without, on an embedded PostgreSQL. Exits 1 if any job is lost or stuck.

Examples:
  $ leasehold demo
  $ DATABASE_URL=postgres://localhost/app leasehold demo --jobs 6000 --json`,
  );
  command.action(async (flags: DemoFlags) => {
    // One signal for the demo: aborted by the deadline or by an interruption, whichever comes first.
    const stop = new AbortController();
    const onInterrupt = () => stop.abort(interrupt.signal.reason);
    interrupt.signal.addEventListener('abort', onInterrupt);
    const deadline = setTimeout(
      () => stop.abort(new Error(`the demo did not finish within ${flags.timeout} s`)),
      flags.timeout * 1000,
    );
    const lastResort = setTimeout(
      () => {
        note('cleanup did not finish in time; exiting');
        process.exit(1);
      },
      flags.timeout * 1000 + CLEANUP_GRACE_MS,
    );
    lastResort.unref();
    try {
      const report = await withDatabase(givenDatabaseUrl(flags), interrupt, (connectionString) =>
        runDemo({
          connectionString,
          jobs: flags.jobs,
          signal: stop.signal,
          display: createProgressDisplay(flags.jobs),
        }),
      );
      process.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
      if (!report.ok) process.exitCode = 1;
    } finally {
      interrupt.signal.removeEventListener('abort', onInterrupt);
      clearTimeout(deadline);
      clearTimeout(lastResort);
    }
  });
  return command;
}

function integerFrom(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < min || n > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}`);
    }
    return n;
  };
}
