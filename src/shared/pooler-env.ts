import { ValidationError } from './errors.js';

/** Connection defaults read from the environment, beside `DATABASE_URL`. */
export interface PoolerDefaults {
  /** False under `LEASEHOLD_POOLER=transaction`. */
  preparedStatements: boolean;
  /** Workers' default: false under `LEASEHOLD_POOLER=transaction` unless a listen URL is set. */
  listen: boolean;
  /** `LEASEHOLD_LISTEN_DATABASE_URL`, when set. */
  listenConnectionString: string | undefined;
}

/**
 * Reads `LEASEHOLD_POOLER` and `LEASEHOLD_LISTEN_DATABASE_URL`, so an operator can put a deployment
 * (the CLI included) behind a pooler without changing code. `LEASEHOLD_POOLER=transaction` says
 * the database URL is a transaction-mode pooler: statements run unnamed, and workers poll unless a
 * direct connection to LISTEN on is given. Unset or `session`: a plain connection. Explicit client
 * options win over both. The URL is never repeated in an error: it may hold a password.
 */
export function poolerDefaults(
  env: Record<string, string | undefined>,
  listenConnectionString: string | undefined,
): PoolerDefaults {
  const mode = env.LEASEHOLD_POOLER?.trim() || 'session';
  if (mode !== 'session' && mode !== 'transaction') {
    throw new ValidationError(
      'LEASEHOLD_POOLER',
      `expected transaction or session, not ${JSON.stringify(mode)}`,
    );
  }
  const listenUrl = listenConnectionString ?? (env.LEASEHOLD_LISTEN_DATABASE_URL?.trim() || undefined);
  const transaction = mode === 'transaction';
  return {
    preparedStatements: !transaction,
    listen: !transaction || listenUrl !== undefined,
    listenConnectionString: listenUrl,
  };
}
