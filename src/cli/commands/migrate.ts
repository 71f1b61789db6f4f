import { Command } from 'commander';
import { closeContext, resolveContext } from '../../context/context.js';
import { type MigrateResult, migrate } from '../../migrations/migrator.js';
import {
  addConnectionOptions,
  type ConnectionFlags,
  chosenDatabase,
  databaseUrlOf,
  withDatabase,
  withOfflineContext,
} from '../connection.js';
import { explainDatabaseError } from '../database-errors.js';
import type { Interrupt } from '../interrupt.js';
import { note } from '../log.js';

interface MigrateFlags extends ConnectionFlags {
  json?: boolean;
}

/** Brings a schema to the latest version on an open database; returns what was applied. */
export async function migrateSchema(connectionString: string, schema: string): Promise<MigrateResult> {
  const context = resolveContext({ connectionString, schema, poolSize: 1 });
  try {
    return await migrate(context.pool, context.schema);
  } finally {
    await closeContext(context);
  }
}

/** The line `leasehold migrate` prints for a result. */
export function describeMigration(schema: string, result: MigrateResult): string {
  const applied = result.applied.length === 0 ? 'already up to date' : `applied ${result.applied.join(', ')}`;
  return `schema ${schema} is at version ${result.version} (${applied})`;
}

/** `leasehold migrate`: creates or upgrades Leasehold's tables. */
export function migrateCommand(interrupt: Interrupt): Command {
  const command = new Command('migrate')
    .description("create or upgrade Leasehold's tables in a schema (safe to run from many processes)")
    .option('--json', 'print the result as JSON: {"schema","version","applied"}');
  addConnectionOptions(command);
  command.addHelpText(
    'after',
    `
Examples:
  $ leasehold migrate --database-url postgres://app:secret@localhost:5432/app
  $ DATABASE_URL=postgres://localhost/app leasehold migrate --schema jobs --json
  $ leasehold migrate --embedded   (a throwaway PostgreSQL, discarded on exit: to try it out)`,
  );
  command.action(async (flags: MigrateFlags) => {
    const schema = flags.schema ?? 'leasehold';
    await withOfflineContext(schema, () => undefined);
    const result = await withDatabase(databaseUrlOf(chosenDatabase(flags)), interrupt, (connectionString) =>
      migrateSchema(connectionString, schema),
    ).catch((err: unknown) => {
      throw explainDatabaseError(err, schema);
    });
    // On stderr, so --json output stays one object: e.g. roles this user could not create.
    for (const notice of result.notices) note(notice);
    process.stdout.write(
      flags.json
        ? `${JSON.stringify({ schema, version: result.version, applied: result.applied })}\n`
        : `${describeMigration(schema, result)}\n`,
    );
  });
  return command;
}
