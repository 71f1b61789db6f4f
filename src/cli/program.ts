import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { adminCommands } from './admin-commands.js';
import { checkCommand } from './commands/check.js';
import { dashboardCommand } from './commands/dashboard.js';
import { demoCommand } from './commands/demo.js';
import { metricsCommand } from './commands/metrics.js';
import { migrateCommand } from './commands/migrate.js';
import { workCommand } from './commands/work.js';
import type { Interrupt } from './interrupt.js';

/** The `leasehold` command line, with every command registered. */
export function createProgram(interrupt: Interrupt): Command {
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
  $ leasehold work ./jobs.mjs
  $ leasehold demo`,
    );
  for (const command of adminCommands(interrupt)) program.addCommand(command);
  // Observability: health rules, Prometheus gauges and the web dashboard.
  program
    .addCommand(checkCommand())
    .addCommand(metricsCommand(interrupt))
    .addCommand(dashboardCommand(interrupt));
  return program;
}

function packageVersion(): string {
  const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
  return (JSON.parse(text) as { version: string }).version;
}
