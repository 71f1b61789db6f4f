import type pg from 'pg';
import { failureReason, isConnectionFailure } from '../connection/failure.js';
import { schemaVersion } from '../migrations/migrator.js';
import { isLeaseholdError } from '../shared/errors.js';
import { CliError } from './errors.js';

// SQLSTATEs that mean "these tables are not there": undefined table, undefined schema.
const MISSING_RELATION = new Set(['42P01', '3F000']);
// Classes and states that mean "could not get a session": connection exceptions (08), bad
// credentials (28), no such database (3D000), the server starting or shutting down (57P0x).
const CONNECTION_STATE = /^(08|28)|^3D000$|^57P0[1-3]$/;
// Node's socket errors, as the driver reports them in place of a SQLSTATE.
const SOCKET_CODE = /^E[A-Z]+$/;

/** Says to run `leasehold migrate` when `schema` holds no Leasehold tables. */
export function notMigrated(schema: string): CliError {
  return new CliError(
    `schema ${schema} is not migrated (it holds no Leasehold tables): run \`leasehold migrate --schema ${schema}\` ` +
      'against this database, or pass the --schema (or LEASEHOLD_SCHEMA) your application uses',
  );
}

/** Refuses to go on when the schema was never migrated; translates a connection failure. */
export async function assertMigrated(pool: pg.Pool, schema: string): Promise<void> {
  let version: number;
  try {
    version = await schemaVersion(pool, schema);
  } catch (err) {
    throw explainDatabaseError(err, schema);
  }
  if (version === 0) throw notMigrated(schema);
}

/**
 * An operator's reading of a database failure: a schema that is not migrated, or a server that
 * cannot be reached or refused the login, says so and what to check; anything else keeps the
 * server's own reason without the internal statement name. Other errors pass through.
 */
export function explainDatabaseError(err: unknown, schema: string): unknown {
  if (err instanceof CliError) return err;
  const state = sqlStateOf(err);
  if (state !== undefined && MISSING_RELATION.has(state)) return notMigrated(schema);
  if (
    isConnectionFailure(err) ||
    (state !== undefined && (CONNECTION_STATE.test(state) || SOCKET_CODE.test(state)))
  ) {
    return new CliError(
      `cannot use the database (${failureReason(err)}): check --database-url or DATABASE_URL`,
    );
  }
  if (isLeaseholdError(err, 'DATABASE')) return new CliError(`the database refused: ${failureReason(err)}`);
  return err;
}

/** The SQLSTATE (or socket code) of a Leasehold database error or of a raw driver error. */
function sqlStateOf(err: unknown): string | undefined {
  const own = (err as { sqlState?: unknown; errno?: unknown } | null) ?? {};
  if (typeof own.sqlState === 'string') return own.sqlState;
  if (typeof own.errno === 'string') return own.errno;
  const cause = (err as { cause?: unknown } | null)?.cause ?? err;
  const code = (cause as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && !isLeaseholdError(cause)) return code;
  if (cause instanceof AggregateError) return sqlStateOf(cause.errors[0]);
  return undefined;
}
