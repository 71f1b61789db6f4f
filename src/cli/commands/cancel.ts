import type { Command } from 'commander';
import { cancel } from '../../operations/operator/cancel.js';
import {
  type AdminFlags,
  actorOption,
  contextFromFlags,
  jobIdArgument,
  type OpenContext,
  reasonOption,
} from '../admin.js';
import { adminCommand } from '../admin-command.js';

interface CancelFlags extends AdminFlags {
  reason: string;
  actor?: string;
}

/** `leasehold cancel <id>`: a pending or running job to `cancelled`. */
export function cancelCommand(open: OpenContext = contextFromFlags): Command {
  return adminCommand<CancelFlags, Awaited<ReturnType<typeof cancel>>>(
    {
      name: 'cancel',
      description:
        'cancel a pending or running job (a running job’s worker is fenced out: nothing it writes lands)',
      define: (command) =>
        command
          .argument('<id>', 'the job id', jobIdArgument)
          .addOption(reasonOption())
          .addOption(actorOption()),
      help: `
Examples:
  $ leasehold cancel 42 --reason "customer withdrew the order"
  $ leasehold cancel 42 --reason "duplicate of 41" --actor alice --json`,
      run: (context, [id], flags) =>
        cancel(context, id as string, {
          reason: flags.reason,
          ...(flags.actor !== undefined && { actor: flags.actor }),
        }),
      text: (result) => `cancelled job ${result.id} (it was ${result.previousStatus})`,
    },
    open,
  );
}
