import { Command } from 'commander';
import { blockedKeys } from '../../operations/operator/ordering.js';
import { queueSummaries } from '../../operations/queues/queues.js';
import {
  type AdminFlags,
  addAdminOptions,
  contextFromFlags,
  type OpenContext,
  print,
  printJson,
  withAdminContext,
} from '../admin.js';
import { formatDuration, formatTable } from '../format.js';

/** `leasehold queues`: every queue at a glance. */
export function queuesCommand(open: OpenContext = contextFromFlags): Command {
  const command = new Command('queues').description(
    "list queues: pending, running and dead jobs, the age of the oldest claimable job, owner, paused, and 'no worker' when claimable work has waited over a minute with no job running",
  );
  addAdminOptions(command);
  command.option('--blocked', 'list ordering keys blocked by a dead job instead, longest blocked first');
  command.addHelpText(
    'after',
    `
Examples:
  $ leasehold queues --database-url postgres://localhost/app
  $ leasehold queues --json | jq '.[] | select(.dead > 0)'
  $ leasehold queues --blocked`,
  );
  command.action(async (flags: AdminFlags & { blocked?: boolean }) => {
    if (flags.blocked) return printBlockedKeys(flags, open);
    const queues = await withAdminContext(flags, open, (context) =>
      queueSummaries(context.pool, context.schema, undefined),
    );
    if (flags.json) return printJson(queues);
    if (queues.length === 0) return print('no queues yet');
    const rows = queues.map((q) => [
      q.name,
      String(q.pending),
      String(q.running),
      String(q.dead),
      formatDuration(q.oldestClaimableAgeMs),
      q.owner ?? '-',
      q.paused ? 'paused' : q.unattended ? 'no worker' : '',
    ]);
    print(formatTable(['queue', 'pending', 'running', 'dead', 'oldest', 'owner', 'state'], rows));
  });
  return command;
}

// Keys whose head job is dead: later jobs of the key wait until it is replayed or skipped.
async function printBlockedKeys(flags: AdminFlags, open: OpenContext): Promise<void> {
  const keys = await withAdminContext(flags, open, (context) =>
    blockedKeys(context.pool, context.schema, {}),
  );
  if (flags.json) return printJson(keys);
  if (keys.length === 0) return print('no blocked ordering keys');
  const rows = keys.map((k) => [
    k.queue,
    k.orderingKey,
    k.headJobId,
    formatDuration(k.blockedMs),
    String(k.waiting),
    k.lastErrorCode ?? '-',
  ]);
  print(formatTable(['queue', 'ordering key', 'dead job', 'blocked for', 'waiting', 'error'], rows));
}
