import { Command } from 'commander';
import type { LeaseholdContext } from '../context/context.js';
import {
  type AdminFlags,
  addAdminOptions,
  contextFromFlags,
  type OpenContext,
  print,
  printJson,
  withAdminContext,
} from './admin.js';
import { CliError } from './errors.js';

/** What one operator command is: its words and help, the operation it runs, how its answer reads. */
export interface AdminCommandSpec<Flags extends AdminFlags, T> {
  name: string;
  description: string;
  /** Adds the command's own arguments and options (listed before the shared connection options). */
  define?: (command: Command) => Command;
  /** Help printed after the options (a note, then examples), as given to `addHelpText('after')`. */
  help?: string;
  /** The operation, on a context opened for this run; `args` are the command's arguments. */
  run: (context: LeaseholdContext, args: string[], flags: Flags) => Promise<T>;
  /** When `run` answers null: the error's message (the thing asked for is not there). */
  missing?: (args: string[]) => string;
  /** The human answer, one block; with `--json` the result itself is printed, or `json(result)`. */
  text: (result: NonNullable<T>, flags: Flags) => string;
  json?: (result: NonNullable<T>, flags: Flags) => unknown;
}

/**
 * The skeleton every operator command shares: its own arguments and options, then the shared
 * connection options and `--json`, its help; the action opens a context (`open`, from the flags by
 * default), runs the operation, closes the context, and prints JSON or the human answer.
 */
export function adminCommand<Flags extends AdminFlags, T>(
  spec: AdminCommandSpec<Flags, T>,
  open: OpenContext = contextFromFlags,
): Command {
  const command = spec.define?.(new Command(spec.name)) ?? new Command(spec.name);
  command.description(spec.description);
  addAdminOptions(command);
  if (spec.help !== undefined) command.addHelpText('after', spec.help);
  command.action(async (...params: unknown[]) => {
    // Commander calls the action with the arguments, then the options, then the command.
    const args = params.slice(0, -2) as string[];
    const flags = params[params.length - 2] as Flags;
    const result = await withAdminContext(flags, open, (context) => spec.run(context, args, flags));
    if (result === null || result === undefined) {
      if (spec.missing) throw new CliError(spec.missing(args));
    }
    const found = result as NonNullable<T>;
    if (flags.json) printJson(spec.json ? spec.json(found, flags) : found);
    else print(spec.text(found, flags));
  });
  return command;
}
