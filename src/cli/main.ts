#!/usr/bin/env node
import { CliError, describeError } from './errors.js';
import { Interrupt } from './interrupt.js';
import { createProgram } from './program.js';

// Watching signals from the start lets every command clean up (an embedded server above all).
const interrupt = new Interrupt();
try {
  await createProgram(interrupt).parseAsync(process.argv);
  // Leaving explicitly: an idle pool timer or a child's pipe must not keep a finished command alive.
  process.exit(process.exitCode ?? 0);
} catch (err) {
  process.stderr.write(`leasehold: ${describeError(err)}\n`);
  // An error that carries no exit code of its own, after a signal, is the interruption's doing.
  process.exit(err instanceof CliError ? err.exitCode : interrupt.received ? 130 : 1);
}
