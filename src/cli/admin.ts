import { type Command, InvalidArgumentError, Option } from 'commander';
import type { LeaseholdOptions } from '../context/client-options.js';
import { closeContext, type LeaseholdContext, resolveContext } from '../context/context.js';
import { assertDatabaseUrl, type ConnectionFlags, givenDatabaseUrl } from './connection.js';
import { assertMigrated, explainDatabaseError } from './database-errors.js';
import { CliError } from './errors.js';

/** Flags every admin command takes. */
export interface AdminFlags extends ConnectionFlags {
  json?: boolean;
}

/**
 * Adds `--database-url` (or `DATABASE_URL`), `--schema` (or `LEASEHOLD_SCHEMA`) and, for a command
 * that prints a result, `--json` (a server has no result to print: there the flag is refused).
 */
export function addAdminOptions(command: Command, { json = true } = {}): Command {
  command
    .addOption(
      new Option('--database-url <url>', 'PostgreSQL connection string of the queue').env('DATABASE_URL'),
    )
    .addOption(schemaOption());
  if (json) command.option('--json', 'print the result as JSON');
  return command;
}

/** `--schema`, also read from `LEASEHOLD_SCHEMA`, defaulting to `leasehold`. */
export function schemaOption(): Option {
  return new Option('--schema <name>', "schema holding Leasehold's tables")
    .env('LEASEHOLD_SCHEMA')
    .default('leasehold');
}

/** Client options an admin command may set besides the connection and schema (e.g. `prune`'s retention). */
export type AdminContextOptions = Omit<LeaseholdOptions, 'connectionString' | 'pool' | 'schema'>;

/**
 * Where an admin command gets its context. The binary resolves one from the flags
 * (`contextFromFlags`); a program built around a context of its own (`createProgram`) hands it in.
 */
export type OpenContext = (flags: AdminFlags, options: AdminContextOptions) => LeaseholdContext;

/**
 * The context the flags name. Admin commands inspect and change an existing queue, so unlike `work`
 * they never start an embedded server: no URL is an error.
 */
export function contextFromFlags(flags: AdminFlags, options: AdminContextOptions = {}): LeaseholdContext {
  const url = givenDatabaseUrl(flags);
  if (!url) throw new CliError('no database: give --database-url or set DATABASE_URL');
  assertDatabaseUrl(url);
  return resolveContext({
    poolSize: 2,
    ...options,
    connectionString: url,
    schema: flags.schema ?? 'leasehold',
  });
}

/**
 * Runs `use` on a context opened by `open` (by default from the flags), then closes it (its pool is
 * ended only if the context created it). The command calls the operation functions on it, as
 * `Leasehold`'s methods do; no client is built.
 */
export async function withAdminContext<T>(
  flags: AdminFlags,
  open: OpenContext,
  use: (context: LeaseholdContext) => Promise<T>,
  options: AdminContextOptions = {},
): Promise<T> {
  const context = open(flags, options);
  try {
    return await runAdminCommand(context, use);
  } finally {
    await closeContext(context);
  }
}

/**
 * Runs one admin command's work on `context`, with the CLI's reading of database failures.
 * One look before anything starts: a server (dashboard, metrics) must not come up on a schema that
 * is not there, and a command must not fail later with a missing-table error.
 */
export async function runAdminCommand<T>(
  context: LeaseholdContext,
  use: (context: LeaseholdContext) => Promise<T>,
): Promise<T> {
  try {
    await assertMigrated(context.pool, context.schema);
    return await use(context);
  } catch (err) {
    throw explainDatabaseError(err, context.schema);
  }
}

/** Writes one line (or a block) of a command's result to stdout. */
export function print(text: string): void {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

/** Writes a value as one line of JSON to stdout. */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

/** Commander parser for a positive integer option. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError('expected a positive whole number');
  }
  return n;
}

/** Commander parser for a job id argument, in an operator's words rather than the API's. */
export function jobIdArgument(value: string): string {
  if (!/^\d{1,19}$/.test(value) || /^0+$/.test(value) || BigInt(value) > 9223372036854775807n) {
    throw new InvalidArgumentError('a job id is a positive whole number, such as 42');
  }
  return value;
}

/** The same for a list of job ids (commander calls it once per id). */
export function jobIdList(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), jobIdArgument(value)];
}

/** Commander parser for a duration: a number of milliseconds, or with a unit (90s, 15m, 24h, 7d). */
export function duration(value: string): number {
  const text = value.trim();
  // One number (ms) or parts with units, as the tables print them: 90s, 4m 10s, 2d 4h, 1h30m.
  if (/^\d+$/.test(text)) return Number(text);
  if (!/^(\d+(ms|s|m|h|d)\s*)+$/.test(text)) {
    throw new InvalidArgumentError('expected a duration such as 90s, 15m, 4m 10s, 24h or 2d 4h');
  }
  const scale: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  let total = 0;
  for (const part of text.matchAll(/(\d+)(ms|s|m|h|d)/g))
    total += Number(part[1]) * (scale[part[2] ?? 'ms'] ?? 1);
  return total;
}

/** Commander parser for a point in time (ISO 8601, e.g. 2024-05-01T12:00:00Z). */
export function isoTime(value: string): Date {
  const date = new Date(value);
  if (!/^\d{4}-\d\d-\d\d/.test(value) || Number.isNaN(date.getTime())) {
    throw new InvalidArgumentError('expected an ISO 8601 time such as 2024-05-01T12:00:00Z');
  }
  return date;
}

/** A `--reason` option, required where an operator's decision is recorded. */
export function reasonOption(): Option {
  return new Option(
    '--reason <text>',
    'why (required; recorded in each job’s history)',
  ).makeOptionMandatory();
}

/** An `--actor` option, defaulting to the operating-system user. */
export function actorOption(): Option {
  return new Option('--actor <name>', 'who (recorded in each job’s history)').default(
    process.env.USER || process.env.USERNAME || undefined,
    '$USER',
  );
}
