import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { packageFileUrl } from '../shared/package-files.js';
import { contextFromFlags, type OpenContext } from './admin.js';
import { adminCommands } from './admin-commands.js';
import { checkCommand } from './commands/check.js';
import { dashboardCommand } from './commands/dashboard.js';
import { demoCommand } from './commands/demo.js';
import { metricsCommand } from './commands/metrics.js';
import { migrateCommand } from './commands/migrate.js';
import { workCommand } from './commands/work.js';
import type { Interrupt } from './interrupt.js';

/** What `createProgram` may be given besides the interrupt. */
export interface ProgramOptions {
  /**
   * Where the commands that work on an existing queue (admin, check, metrics, dashboard) get their
   * context. Default: resolved from `--database-url` and `--schema`.
   */
  openContext?: OpenContext;
}

/** The `leasehold` command line, with every command registered. */
export function createProgram(
  interrupt: Interrupt,
  { openContext = contextFromFlags }: ProgramOptions = {},
): Command {
  const program = new Command('leasehold')
    .description('Leasehold: a PostgreSQL job queue built on expiring leases and fencing tokens')
    .version(packageVersion(), '-V, --version')
    .addCommand(migrateCommand(interrupt))
    .addCommand(workCommand(interrupt))
    .addCommand(demoCommand(interrupt))
    .addHelpText(
      'after',
      `
Examples:
  $ leasehold migrate --database-url postgres://app:secret@localhost:5432/app
  $ DATABASE_URL=postgres://app:secret@localhost:5432/app leasehold work ./jobs.mjs
  $ leasehold demo                 (starts a throwaway PostgreSQL of its own)`,
    );
  for (const command of adminCommands(interrupt, openContext)) program.addCommand(command);
  // Observability: health rules, Prometheus gauges and the web dashboard.
  program
    .addCommand(checkCommand(openContext))
    .addCommand(metricsCommand(interrupt, openContext))
    .addCommand(dashboardCommand(interrupt, openContext));
  escapeParserErrors(program);
  return program;
}

/**
 * Commander quotes a refused argument as it was given. Escaping control characters there keeps its
 * error on one line and keeps a hostile argument from sending escape sequences to the terminal.
 * Its "error: " prefix becomes ours ("leasehold: "), so every refusal reads the same.
 */
function escapeParserErrors(command: Command): void {
  command.configureOutput({
    outputError: (text, write) =>
      write(`${escapeControls(text.replace(/\n$/, '').replace(/^error: /, 'leasehold: '))}\n`),
  });
  for (const sub of command.commands) escapeParserErrors(sub);
}

// C0 and C1 control characters as \uXXXX; everything else as given.
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is escaped.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
function escapeControls(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function packageVersion(): string {
  const text = readFileSync(packageFileUrl('../package.json'), 'utf8');
  return (JSON.parse(text) as { version: string }).version;
}
