import cliProgress from 'cli-progress';
import { Command, Option } from 'commander';
import type { ReplayFilter, ReplayOptions } from '../../operations/operator/replay.js';
import { replay } from '../../operations/operator/replay.js';
import { assertKnownQueue } from '../../operations/queues/known-queues.js';
import {
  type AdminFlags,
  actorOption,
  addAdminOptions,
  contextFromFlags,
  isoTime,
  jobIdList,
  type OpenContext,
  positiveInt,
  print,
  printJson,
  reasonOption,
  withAdminContext,
} from '../admin.js';
import { CliError } from '../errors.js';
import type { Interrupt } from '../interrupt.js';

interface ReplayFlags extends AdminFlags {
  queue?: string;
  errorCode?: string;
  since?: Date;
  before?: Date;
  reason: string;
  actor?: string;
  keepAttempts?: boolean;
  retryUncertainEffects?: boolean;
  batchSize?: number;
}

/** `leasehold replay`: dead jobs back to pending, by id or by filter, with a progress bar. */
export function replayCommand(interrupt: Interrupt, open: OpenContext = contextFromFlags): Command {
  const command = new Command('replay')
    .description(
      'return dead jobs to pending with the same id and a fresh attempt budget, keeping their history',
    )
    .argument('[ids...]', 'job ids to replay (all must be dead, or nothing is replayed)', jobIdList)
    .option('--queue <name>', 'replay the dead jobs of this queue')
    .option('--error-code <code>', 'replay the dead jobs that died with this error code')
    .option('--since <time>', 'replay the dead jobs that died at or after this ISO 8601 time', isoTime)
    .option('--before <time>', 'replay the dead jobs that died before this ISO 8601 time', isoTime)
    .addOption(reasonOption())
    .addOption(actorOption())
    .option('--keep-attempts', 'keep counting attempts (the budget is raised) instead of restarting at 1')
    .option(
      '--retry-uncertain-effects',
      'perform effects left uncertain again (only once you checked they did not happen)',
    )
    .addOption(
      new Option('--batch-size <n>', 'jobs per transaction for a filter replay')
        .argParser(positiveInt)
        .default(500),
    );
  addAdminOptions(command);
  command.addHelpText(
    'after',
    `
Examples:
  $ leasehold replay 41 42 --reason "fixed the template"
  $ leasehold replay --queue emails --error-code SMTP_421 --reason "provider outage over"
  $ leasehold replay --queue reports --since 2024-05-01T00:00:00Z --reason "bug 123 fixed" --json`,
  );
  command.action(async (ids: string[], flags: ReplayFlags) => {
    const filter: ReplayFilter = {
      ...(flags.queue !== undefined && { queue: flags.queue }),
      ...(flags.errorCode !== undefined && { errorCode: flags.errorCode }),
      ...(flags.since !== undefined && { since: flags.since }),
      ...(flags.before !== undefined && { before: flags.before }),
    };
    const byFilter = Object.keys(filter).length > 0;
    if (byFilter === ids.length > 0) {
      throw new CliError(
        'give job ids or a filter (--queue, --error-code, --since, --before), not both or neither',
      );
    }
    const options: ReplayOptions = {
      reason: flags.reason,
      ...(flags.actor !== undefined && { actor: flags.actor }),
      resetAttempts: !flags.keepAttempts,
      retryUncertainEffects: flags.retryUncertainEffects === true,
    };
    if (!byFilter) {
      const result = await withAdminContext(flags, open, (context) =>
        replay(context.pool, context.schema, ids, options),
      );
      if (flags.json) printJson(result);
      else print(`replayed ${result.replayed} job(s): ${result.ids?.join(', ')}`);
      return;
    }
    const bar =
      flags.json || !process.stderr.isTTY
        ? null
        : new cliProgress.SingleBar(
            { stream: process.stderr, format: 'replaying {bar} {value}/{total} jobs', hideCursor: true },
            cliProgress.Presets.shades_classic,
          );
    let barStarted = false;
    try {
      const result = await withAdminContext(flags, open, async (context) => {
        // A typo would replay nothing and exit 0: refuse a queue that is not known instead.
        if (flags.queue !== undefined) await assertKnownQueue(context.pool, context.schema, flags.queue);
        return replay(context.pool, context.schema, filter, {
          ...options,
          ...(flags.batchSize !== undefined && { batchSize: flags.batchSize }),
          onProgress: ({ replayed, total }) => {
            if (bar && !barStarted) bar.start(total, 0);
            barStarted = true;
            bar?.setTotal(total);
            bar?.update(replayed);
            // A signal stops the replay between batches: every batch already done is committed.
            interrupt.throwIfReceived();
          },
        });
      });
      bar?.stop();
      barStarted = false;
      if (flags.json) printJson(result);
      else print(`replayed ${result.replayed} job(s)`);
    } finally {
      if (barStarted) bar?.stop();
    }
  });
  return command;
}
