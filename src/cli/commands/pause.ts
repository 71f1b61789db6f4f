import { Command } from 'commander';
import { setQueuePaused } from '../../operations/queues/queue-settings.js';
import {
  type AdminFlags,
  addAdminOptions,
  contextFromFlags,
  type OpenContext,
  print,
  printJson,
  withAdminContext,
} from '../admin.js';

/** `leasehold pause <queue>`: stop claims from a queue; running jobs finish. */
export function pauseCommand(open: OpenContext = contextFromFlags): Command {
  const command = new Command('pause')
    .description('pause a queue: its jobs are not claimed until it is resumed; running jobs finish')
    .argument('<queue>', 'the queue name')
    .option(
      '--create',
      'pause a queue that is not known yet (before its first job); without it, an unknown name is refused',
    );
  addAdminOptions(command);
  command.addHelpText(
    'after',
    '\nExamples:\n  $ leasehold pause emails\n  $ leasehold pause emails --json\n  $ leasehold pause reports --create   # before the first report is enqueued',
  );
  command.action(async (queue: string, flags: AdminFlags & { create?: boolean }) => {
    const settings = await withAdminContext(flags, open, (context) =>
      setQueuePaused(context, queue, true, { create: flags.create === true }),
    );
    if (flags.json) printJson(settings);
    else print(`queue ${settings.name} paused: no new claims until \`leasehold resume ${settings.name}\``);
  });
  return command;
}
