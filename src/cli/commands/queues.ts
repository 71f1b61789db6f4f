import { Command } from 'commander';
import { type AdminFlags, addAdminOptions, print, printJson, withAdminClient } from '../admin.js';
import { formatDuration, formatTable } from '../format.js';

/** `leasehold queues`: every queue at a glance. */
export function queuesCommand(): Command {
  const command = new Command('queues').description(
    'list queues: pending, running and dead jobs, the age of the oldest claimable job, owner, paused',
  );
  addAdminOptions(command);
  command.addHelpText(
    'after',
    `
Examples:
  $ leasehold queues --database-url postgres://localhost/app
  $ leasehold queues --json | jq '.[] | select(.dead > 0)'`,
  );
  command.action(async (flags: AdminFlags) => {
    const queues = await withAdminClient(flags, (lh) => lh.listQueues());
    if (flags.json) return printJson(queues);
    if (queues.length === 0) return print('no queues yet');
    const rows = queues.map((q) => [
      q.name,
      String(q.pending),
      String(q.running),
      String(q.dead),
      formatDuration(q.oldestClaimableAgeMs),
      q.owner ?? '-',
      q.paused ? 'paused' : '',
    ]);
    print(formatTable(['queue', 'pending', 'running', 'dead', 'oldest', 'owner', 'state'], rows));
  });
  return command;
}
