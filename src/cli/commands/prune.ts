import { Command, Option } from 'commander';
import { prune } from '../../operations/schema/prune.js';
import { DEFAULT_SUCCEEDED_RETENTION_MS } from '../../shared/defaults.js';
import {
  type AdminFlags,
  addAdminOptions,
  contextFromFlags,
  duration,
  type OpenContext,
  positiveInt,
  print,
  printJson,
  withAdminContext,
} from '../admin.js';

interface PruneFlags extends AdminFlags {
  succeededRetention: number;
  batchSize?: number;
  limit?: number;
}

/** `leasehold prune`: one retention pass now. */
export function pruneCommand(open: OpenContext = contextFromFlags): Command {
  const command = new Command('prune')
    .description(
      'remove succeeded jobs past their retention, and dead or cancelled jobs past their queue’s dead retention (leaving a tombstone)',
    )
    .addOption(
      new Option(
        '--succeeded-retention <duration>',
        'keep succeeded jobs this long (queues may set their own)',
      )
        .argParser(duration)
        .default(DEFAULT_SUCCEEDED_RETENTION_MS, '1h'),
    )
    .option('--batch-size <n>', 'rows per transaction (at most 1000)', positiveInt)
    .option('--limit <n>', 'most rows of each kind to remove in this run', positiveInt);
  addAdminOptions(command);
  command.addHelpText(
    'after',
    `
Dead jobs are kept until an operator acts, unless their queue sets a dead retention
(lh.configureQueue(queue, { deadRetentionMs })). Workers prune on their own every minute.

Examples:
  $ leasehold prune
  $ leasehold prune --succeeded-retention 15m --json`,
  );
  command.action(async (flags: PruneFlags) => {
    const result = await withAdminContext(
      flags,
      open,
      // The flag's retention, on a context handed in as on one resolved from the flags (which
      // validates it as `new Leasehold({ succeededRetentionMs })` would).
      (context) =>
        prune(
          { ...context, succeededRetentionMs: flags.succeededRetention },
          {
            ...(flags.batchSize !== undefined && { batchSize: flags.batchSize }),
            ...(flags.limit !== undefined && { limit: flags.limit }),
          },
        ),
      { succeededRetentionMs: flags.succeededRetention },
    );
    if (flags.json) printJson(result);
    else
      print(`removed ${result.succeeded} succeeded job(s) and ${result.terminal} dead or cancelled job(s)`);
  });
  return command;
}
