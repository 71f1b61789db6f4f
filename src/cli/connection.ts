import { type Command, Option } from 'commander';
import pg from 'pg';
import { closeContext, type LeaseholdContext, resolveContext } from '../context/context.js';
import { startCommandServer } from './embedded-server.js';
import { CliError, describeError } from './errors.js';
import type { Interrupt } from './interrupt.js';
import { note } from './log.js';

/** Connection options as commander parses them. */
export interface ConnectionFlags {
  /** From `--database-url` or `DATABASE_URL`. */
  databaseUrl?: string;
  /** From `--schema` or `LEASEHOLD_SCHEMA` (commands that take one). */
  schema?: string;
  /** From `--embedded`: start a throwaway PostgreSQL for the command. */
  embedded?: boolean;
}

/**
 * Adds `--database-url` (or `DATABASE_URL`), unless told otherwise `--schema` (or
 * `LEASEHOLD_SCHEMA`), and `--embedded` where a throwaway database is an explicit choice (`work`,
 * `migrate`). With `embedded: 'default'` (the demo) no URL means an embedded database.
 */
export function addConnectionOptions(
  command: Command,
  { schema = true, embedded = 'flag' as 'flag' | 'default' } = {},
): Command {
  command.addOption(
    new Option(
      '--database-url <url>',
      embedded === 'default'
        ? 'PostgreSQL connection string; without one, an embedded PostgreSQL is started for the command'
        : 'PostgreSQL connection string (required, unless --embedded)',
    ).env('DATABASE_URL'),
  );
  if (schema) {
    command.addOption(
      new Option('--schema <name>', "schema holding Leasehold's tables")
        .env('LEASEHOLD_SCHEMA')
        .default('leasehold'),
    );
  }
  if (embedded === 'flag') {
    command.option(
      '--embedded',
      'start a throwaway embedded PostgreSQL for this command instead (its data is discarded on exit)',
    );
  }
  return command;
}

/**
 * The database a `work` or `migrate` command uses: the URL given, or an embedded one only when
 * asked for. A worker that silently drains a throwaway database looks healthy and does nothing.
 */
export function chosenDatabase(flags: ConnectionFlags): { url: string } | { embedded: true } {
  const url = givenDatabaseUrl(flags);
  if (url && flags.embedded) throw new CliError('give --database-url or --embedded, not both');
  if (url) return { url };
  if (flags.embedded) return { embedded: true };
  throw new CliError(
    'no database: give --database-url or set DATABASE_URL (or --embedded for a throwaway PostgreSQL whose data is discarded on exit)',
  );
}

/**
 * Refuses a connection string pg cannot use, before anything starts. The message never repeats
 * the string: it may hold a password.
 */
export function assertDatabaseUrl(url: string): void {
  if (url.startsWith('/')) return; // a socket directory, which pg accepts as is
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw new CliError('--database-url: not a URL; expected postgres://user:password@host:5432/database');
  }
  if (protocol !== 'postgres:' && protocol !== 'postgresql:' && protocol !== 'socket:') {
    throw new CliError(`--database-url: expected a postgres:// URL, not ${protocol}//`);
  }
}

/**
 * Checks a schema name with the client's own validation, without connecting: the context is
 * resolved over a pool that never opens a connection. Bad input fails at once, before an embedded
 * server takes seconds to start.
 */
export async function withOfflineContext<T>(
  schema: string,
  use: (context: LeaseholdContext) => T,
): Promise<T> {
  const pool = new pg.Pool({ max: 1 });
  try {
    const context = resolveContext({ pool, schema });
    try {
      return use(context);
    } finally {
      await closeContext(context);
    }
  } finally {
    await pool.end();
  }
}

/**
 * Runs `use` with a connection string: the one given, or an embedded server's, started for the
 * command and stopped after it, whatever happens (a signal included).
 */
export async function withDatabase<T>(
  databaseUrl: string | undefined,
  interrupt: Interrupt,
  use: (connectionString: string) => Promise<T>,
): Promise<T> {
  if (databaseUrl) {
    assertDatabaseUrl(databaseUrl);
    return use(databaseUrl);
  }
  const server = await startCommandServer();
  try {
    interrupt.throwIfReceived();
    return await use(server.connectionString);
  } finally {
    await server.stop().catch((err: unknown) => {
      note(`could not stop the embedded PostgreSQL: ${describeError(err)}`);
    });
  }
}

/** The database URL given, treating an empty `DATABASE_URL` as none. */
export function givenDatabaseUrl(flags: ConnectionFlags): string | undefined {
  return flags.databaseUrl?.trim() ? flags.databaseUrl : undefined;
}

/** The URL of a chosen database; undefined for an embedded one (withDatabase then starts it). */
export function databaseUrlOf(choice: { url: string } | { embedded: true }): string | undefined {
  return 'url' in choice ? choice.url : undefined;
}
