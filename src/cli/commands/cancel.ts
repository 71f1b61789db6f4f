import { Command } from 'commander';
import { cancel } from '../../operations/operator/cancel.js';
import {
  type AdminFlags,
  actorOption,
  addAdminOptions,
  contextFromFlags,
  jobIdArgument,
  type OpenContext,
  print,
  printJson,
  reasonOption,
  withAdminContext,
} from '../admin.js';

interface CancelFlags extends AdminFlags {
  reason: string;
  actor?: string;
}

/** `leasehold cancel <id>`: a pending or running job to `cancelled`. */
export function cancelCommand(open: OpenContext = contextFromFlags): Command {
  const command = new Command('cancel')
    .description(
      'cancel a pending or running job (a running job’s worker is fenced out: nothing it writes lands)',
    )
    .argument('<id>', 'the job id', jobIdArgument)
    .addOption(reasonOption())
    .addOption(actorOption());
  addAdminOptions(command);
  command.addHelpText(
    'after',
    `
Examples:
  $ leasehold cancel 42 --reason "customer withdrew the order"
  $ leasehold cancel 42 --reason "duplicate of 41" --actor alice --json`,
  );
  command.action(async (id: string, flags: CancelFlags) => {
    const result = await withAdminContext(flags, open, (context) =>
      cancel(context.pool, context.schema, id, {
        reason: flags.reason,
        ...(flags.actor !== undefined && { actor: flags.actor }),
      }),
    );
    if (flags.json) printJson(result);
    else print(`cancelled job ${result.id} (it was ${result.previousStatus})`);
  });
  return command;
}
