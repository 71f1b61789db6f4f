import { type Command, Option } from 'commander';
import pg from 'pg';
import { Leasehold } from '../index.js';
import { startCommandServer } from './embedded-server.js';
import { CliError, describeError } from './errors.js';
import type { Interrupt } from './interrupt.js';
import { note } from './log.js';

/** Connection options as commander parses them. */
export interface ConnectionFlags {
  /** From `--database-url` or `DATABASE_URL`. */
  databaseUrl?: string;
  /** From `--schema` (commands that take one). */
  schema?: string;
}

/** Adds `--database-url` (or `DATABASE_URL`) and, unless told otherwise, `--schema`. */
export function addConnectionOptions(command: Command, { schema = true } = {}): Command {
  command.addOption(
    new Option(
      '--database-url <url>',
      'PostgreSQL connection string; without one, an embedded PostgreSQL is started for the command',
    ).env('DATABASE_URL'),
  );
  if (schema) {
    command.addOption(
      new Option('--schema <name>', "schema holding Leasehold's tables").default('leasehold'),
    );
  }
  return command;
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
 * Checks a schema name with the client's own validation, without connecting: the client is built
 * over a pool that never opens a connection. Bad input fails at once, before an embedded server
 * takes seconds to start.
 */
export async function withOfflineClient<T>(schema: string, use: (lh: Leasehold) => T): Promise<T> {
  const pool = new pg.Pool({ max: 1 });
  try {
    return use(new Leasehold({ pool, schema }));
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
