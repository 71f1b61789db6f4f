import type { Command } from 'commander';
import { blockedKeys } from '../../operations/operator/ordering.js';
import { type QueueSummary, queueSummaries } from '../../operations/queues/queues.js';
import { type AdminFlags, contextFromFlags, type OpenContext } from '../admin.js';
import { adminCommand } from '../admin-command.js';
import { formatDuration, formatTable } from '../format.js';

type QueuesAnswer =
  | { blocked: false; queues: QueueSummary[] }
  | { blocked: true; keys: Awaited<ReturnType<typeof blockedKeys>> };

/** `leasehold queues`: every queue at a glance (or, with `--blocked`, the blocked ordering keys). */
export function queuesCommand(open: OpenContext = contextFromFlags): Command {
  return adminCommand<AdminFlags & { blocked?: boolean }, QueuesAnswer>(
    {
      name: 'queues',
      description:
        "list queues: pending, running and dead jobs, the age of the oldest claimable job, owner, paused, and 'no worker' when claimable work has waited over a minute with no job running",
      define: (command) =>
        command.option(
          '--blocked',
          'list ordering keys blocked by a dead job instead, longest blocked first',
        ),
      help: `
Examples:
  $ leasehold queues --database-url postgres://localhost/app
  $ leasehold queues --json | jq '.[] | select(.dead > 0)'
  $ leasehold queues --blocked`,
      run: async (context, _args, flags) =>
        flags.blocked
          ? { blocked: true, keys: await blockedKeys(context, {}) }
          : { blocked: false, queues: await queueSummaries(context.pool, context.schema, undefined) },
      json: (answer) => (answer.blocked ? answer.keys : answer.queues),
      text: (answer) => (answer.blocked ? describeBlockedKeys(answer.keys) : describeQueues(answer.queues)),
    },
    open,
  );
}

function describeQueues(queues: readonly QueueSummary[]): string {
  if (queues.length === 0) return 'no queues yet';
  const rows = queues.map((q) => [
    q.name,
    String(q.pending),
    String(q.running),
    String(q.dead),
    formatDuration(q.oldestClaimableAgeMs),
    q.owner ?? '-',
    q.paused ? 'paused' : q.unattended ? 'no worker' : '',
  ]);
  return formatTable(['queue', 'pending', 'running', 'dead', 'oldest', 'owner', 'state'], rows);
}

// Keys whose head job is dead: later jobs of the key wait until it is replayed or skipped.
function describeBlockedKeys(keys: Awaited<ReturnType<typeof blockedKeys>>): string {
  if (keys.length === 0) return 'no blocked ordering keys';
  const rows = keys.map((k) => [
    k.queue,
    k.orderingKey,
    k.headJobId,
    formatDuration(k.blockedMs),
    String(k.waiting),
    k.lastErrorCode ?? '-',
  ]);
  return formatTable(['queue', 'ordering key', 'dead job', 'blocked for', 'waiting', 'error'], rows);
}
