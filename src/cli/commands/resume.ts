import { Command } from 'commander';
import { type AdminFlags, addAdminOptions, print, printJson, withAdminClient } from '../admin.js';

/** `leasehold resume <queue>`: let a paused queue be claimed again. */
export function resumeCommand(): Command {
  const command = new Command('resume')
    .description('resume a paused queue: its jobs are claimed again')
    .argument('<queue>', 'the queue name');
  addAdminOptions(command);
  command.addHelpText(
    'after',
    '\nExamples:\n  $ leasehold resume emails\n  $ leasehold resume emails --json',
  );
  command.action(async (queue: string, flags: AdminFlags) => {
    const settings = await withAdminClient(flags, (lh) => lh.resumeQueue(queue));
    if (flags.json) printJson(settings);
    else print(`queue ${settings.name} resumed`);
  });
  return command;
}
