import { Command } from 'commander';
import {
  type AdminFlags,
  actorOption,
  addAdminOptions,
  jobIdArgument,
  print,
  printJson,
  reasonOption,
  withAdminClient,
} from '../admin.js';

interface CancelFlags extends AdminFlags {
  reason: string;
  actor?: string;
}

/** `leasehold cancel <id>`: a pending or running job to `cancelled`. */
export function cancelCommand(): Command {
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
    const result = await withAdminClient(flags, (lh) =>
      lh.cancel(id, { reason: flags.reason, ...(flags.actor !== undefined && { actor: flags.actor }) }),
    );
    if (flags.json) printJson(result);
    else print(`cancelled job ${result.id} (it was ${result.previousStatus})`);
  });
  return command;
}
