import { Command } from 'commander';
import { type FlowView, getFlow } from '../../operations/producer/flows.js';
import {
  type AdminFlags,
  addAdminOptions,
  contextFromFlags,
  jobIdArgument,
  type OpenContext,
  print,
  printJson,
  withAdminContext,
} from '../admin.js';
import { CliError } from '../errors.js';
import { formatTable, formatTime } from '../format.js';

/** `leasehold flows show <id>`: the flow holding a job, each node with its status and parents. */
export function flowsCommand(open: OpenContext = contextFromFlags): Command {
  const show = new Command('show')
    .description('show the flow a job belongs to: every job, its status and what it waits for')
    .argument('<id>', 'the id of any job in the flow', jobIdArgument);
  addAdminOptions(show);
  show.addHelpText(
    'after',
    `
Examples:
  $ leasehold flows show 42 --database-url postgres://localhost/app
  $ leasehold flows show 42 --json | jq '.nodes[] | select(.status == "blocked")'`,
  );
  show.action(async (id: string, flags: AdminFlags) => {
    const flow = await withAdminContext(flags, open, (context) => getFlow(context, id));
    if (!flow) throw new CliError(`job ${id} is in no flow (or its flow was removed by retention)`);
    if (flags.json) printJson(flow);
    else print(describeFlow(flow));
  });
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
