import { Command } from 'commander';
import { setQueuePaused } from '../../operations/queue-settings.js';
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
    .argument('<queue>', 'the queue name');
  addAdminOptions(command);
  command.addHelpText('after', '\nExamples:\n  $ leasehold pause emails\n  $ leasehold pause emails --json');
  command.action(async (queue: string, flags: AdminFlags) => {
    const settings = await withAdminContext(flags, open, (context) => setQueuePaused(context, queue, true));
    if (flags.json) printJson(settings);
    else print(`queue ${settings.name} paused: no new claims until \`leasehold resume ${settings.name}\``);
  });
  return command;
}
