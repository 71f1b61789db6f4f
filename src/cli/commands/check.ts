import { Command, InvalidArgumentError } from 'commander';
import { checkHealth, type HealthRules } from '../../operations/schema/health.js';
import {
  type AdminFlags,
  addAdminOptions,
  contextFromFlags,
  duration,
  type OpenContext,
  print,
  printJson,
  withAdminContext,
} from '../admin.js';
import { CliError } from '../errors.js';

interface CheckFlags extends AdminFlags {
  maxOldestAge?: number;
  maxDead?: number;
  maxOldestDeadAge?: number;
  maxExpiringLeases?: number;
  maxOldTransaction?: number;
  maxDeadTupleRatio?: number;
  queue?: string[];
}

/** `leasehold check`: health rules for cron jobs and orchestrator probes; exits 1 when one fails. */
export function checkCommand(open: OpenContext = contextFromFlags): Command {
  const command = new Command('check')
    .description('check queue health: exit 0 when every rule passes, 1 with one line per failed rule')
    .option(
      '--max-oldest-age <duration>',
      'oldest claimable job waited longer than this (old work)',
      duration,
    )
    .option('--max-dead <n>', 'more dead jobs than this in a queue', wholeNumber)
    .option('--max-oldest-dead-age <duration>', 'oldest unresolved dead job older than this', duration)
    .option('--max-expiring-leases <n>', 'more leases than this ending within 30 s in a queue', wholeNumber)
    .option(
      '--max-old-transaction <duration>',
      'a transaction open longer than this, holding back cleanup',
      duration,
    )
    .option('--max-dead-tuple-ratio <ratio>', 'dead tuples above this share (0..1) of the jobs table', ratio)
    .option('--queue <name...>', 'only these queues (default: all)');
  addAdminOptions(command);
  command.addHelpText(
    'after',
    `
Examples:
  $ leasehold check --max-oldest-age 5m --max-dead 0
  $ leasehold check --max-old-transaction 10m --max-dead-tuple-ratio 0.2 --json`,
  );
  command.action(async (flags: CheckFlags) => {
    const rules: HealthRules = {
      ...(flags.maxOldestAge !== undefined && { maxOldestAgeMs: flags.maxOldestAge }),
      ...(flags.maxDead !== undefined && { maxDead: flags.maxDead }),
      ...(flags.maxOldestDeadAge !== undefined && { maxOldestDeadAgeMs: flags.maxOldestDeadAge }),
      ...(flags.maxExpiringLeases !== undefined && { maxLeasesExpiringSoon: flags.maxExpiringLeases }),
      ...(flags.maxOldTransaction !== undefined && { maxOldTransactionMs: flags.maxOldTransaction }),
      ...(flags.maxDeadTupleRatio !== undefined && { maxDeadTupleRatio: flags.maxDeadTupleRatio }),
      ...(flags.queue !== undefined && { queues: flags.queue }),
    };
    if (Object.keys(rules).filter((key) => key !== 'queues').length === 0) {
      throw new CliError('give at least one rule, e.g. --max-oldest-age 5m or --max-dead 0');
    }
    const report = await withAdminContext(flags, open, (context) =>
      checkHealth(context.pool, context.schema, rules),
    );
    if (flags.json) printJson(report);
    else if (report.ok) print('ok');
    else for (const failure of report.failures) print(`FAIL ${failure.rule}: ${failure.message}`);
    if (!report.ok) process.exitCode = 1;
  });
  return command;
}

function wholeNumber(value: string): number {
  const n = Number(value);
  // "-3" is a whole number, just not one these rules take: say which numbers they do.
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n))
    throw new InvalidArgumentError('expected a whole number ≥ 0, such as 0 or 5');
  return n;
}

function ratio(value: string): number {
  const n = Number(value);
  if (!/^\d*\.?\d+$/.test(value) || n > 1) throw new InvalidArgumentError('expected a ratio between 0 and 1');
  return n;
}
