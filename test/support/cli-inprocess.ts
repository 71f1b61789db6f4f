import { type Command, CommanderError } from 'commander';
import { vi } from 'vitest';
import { CliError, describeError } from '../../src/cli/errors.js';
import { Interrupt } from '../../src/cli/interrupt.js';
import { createProgram, type ProgramOptions } from '../../src/cli/program.js';

/** What a `leasehold` command run in this process printed, and the exit code the binary would give. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `leasehold <args>` in this process through the program the binary builds, reporting errors
 * as src/cli/main.ts does (one line, `leasehold: ...`). For tests that need the commands' traffic
 * or output, not the process around them (test/support/cli-build.ts builds the real binary).
 * `options` go to `createProgram` (e.g. a context for the commands to run on).
 */
export async function runCliInProcess(args: string[], options: ProgramOptions = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const interrupt = new Interrupt();
  const program = createProgram(interrupt, options);
  const quiet = (command: Command) => {
    command.exitOverride();
    command.configureOutput({
      writeOut: (s) => {
        stdout += s;
      },
      writeErr: (s) => {
        stderr += s;
      },
    });
    for (const sub of command.commands) quiet(sub);
  };
  quiet(program);
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  // A command that fails softly (`check`) sets process.exitCode: report it, then restore ours.
  const exitCode = process.exitCode;
  process.exitCode = undefined;
  try {
    await program.parseAsync(['node', 'leasehold', ...args]);
    return { code: Number(process.exitCode ?? 0), stdout, stderr };
  } catch (err) {
    if (err instanceof CommanderError) return { code: err.exitCode, stdout, stderr };
    stderr += `leasehold: ${describeError(err)}\n`;
    return { code: err instanceof CliError ? err.exitCode : 1, stdout, stderr };
  } finally {
    process.exitCode = exitCode;
    out.mockRestore();
    interrupt.dispose();
  }
}
