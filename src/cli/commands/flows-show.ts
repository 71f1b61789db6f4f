import { Command } from 'commander';
import { type FlowView, getFlow } from '../../operations/producer/flows.js';
import { type AdminFlags, contextFromFlags, jobIdArgument, type OpenContext } from '../admin.js';
import { adminCommand } from '../admin-command.js';
import { formatTable, formatTime } from '../format.js';

/** `leasehold flows show <id>`: the flow holding a job, each node with its status and parents. */
export function flowsCommand(open: OpenContext = contextFromFlags): Command {
  const show = adminCommand<AdminFlags, FlowView | null>(
    {
      name: 'show',
      description: 'show the flow a job belongs to: every job, its status and what it waits for',
      define: (command) => command.argument('<id>', 'the id of any job in the flow', jobIdArgument),
      help: `
Examples:
  $ leasehold flows show 42 --database-url postgres://localhost/app
  $ leasehold flows show 42 --json | jq '.nodes[] | select(.status == "blocked")'`,
      run: (context, [id]) => getFlow(context, id as string),
      missing: ([id]) => `job ${id} is in no flow (or its flow was removed by retention)`,
      text: (flow) => describeFlow(flow),
    },
    open,
  );
  return new Command('flows').description('inspect flows (jobs that depend on jobs)').addCommand(show);
}

function describeFlow(flow: FlowView): string {
  const counts = new Map<string, number>();
  for (const node of flow.nodes) counts.set(node.status, (counts.get(node.status) ?? 0) + 1);
  const summary = [...counts].map(([status, n]) => `${n} ${status}`).join(', ');
  const rows = flow.nodes.map((node) => [
    node.ref,
    node.id,
    node.queue ?? '',
    node.status,
    node.dependsOn.length > 3
      ? `${node.dependsOn.slice(0, 3).join(', ')} +${node.dependsOn.length - 3}`
      : node.dependsOn.join(', '),
    node.onParentDead,
    node.lastErrorCode ?? '',
  ]);
  return [
    `flow ${flow.flowId}, created ${formatTime(flow.createdAt)}: ${flow.nodes.length} jobs (${summary})`,
    '',
    formatTable(['ref', 'job', 'queue', 'status', 'depends on', 'if parent dead', 'error'], rows),
  ].join('\n');
}
