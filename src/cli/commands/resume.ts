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

/** `leasehold resume <queue>`: let a paused queue be claimed again. */
export function resumeCommand(open: OpenContext = contextFromFlags): Command {
  const command = new Command('resume')
    .description('resume a paused queue: its jobs are claimed again')
    .argument('<queue>', 'the queue name');
  addAdminOptions(command);
  command.addHelpText(
    'after',
    '\nExamples:\n  $ leasehold resume emails\n  $ leasehold resume emails --json',
  );
  command.action(async (queue: string, flags: AdminFlags) => {
    const settings = await withAdminContext(flags, open, (context) => setQueuePaused(context, queue, false));
    if (flags.json) printJson(settings);
    else print(`queue ${settings.name} resumed`);
  });
  return command;
}
