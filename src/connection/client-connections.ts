import type pg from 'pg';
import { MAX_LEASE_MS } from '../config.js';
import { DEFAULT_POOL_SIZE } from '../defaults.js';
import { ValidationError } from '../errors.js';
import { optionalInt } from '../validation.js';
import {
  createLeaseholdPool,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type ListenConnection,
  listenConnectionFor,
  plainListenConnection,
} from './leasehold-pool.js';
import { resolveConnectionSettings, type TargetSessionAttrs } from './settings.js';
import type { StatementWatch } from './statement-watch.js';

/** What a client connects through, resolved from its options once. */
export interface ClientConnections {
  pool: pg.Pool;
  /** True when Leasehold created the pool (and ends it on close). */
  ownsPool: boolean;
  /** Statements outstanding on the pool Leasehold created; null for a pool of the caller's. */
  statements: StatementWatch | null;
  /** Settings of the workers' LISTEN connection (a direct one, or the pool's). */
  listenConnection: pg.ClientConfig;
  /** How the workers open it: through the same host list as the pool. */
  listenVia: ListenConnection;
}

/**
 * The client options this module reads: a part of `LeaseholdOptions` (documented there), named
 * here so that connection/ needs nothing from the rooms above it.
 */
export interface ConnectionOptions {
  connectionString?: string;
  hosts?: readonly { host: string; port?: number }[];
  targetSessionAttrs?: TargetSessionAttrs;
  statementTimeoutMs?: number;
  connectTimeoutMs?: number;
  pool?: pg.Pool;
  poolSize?: number;
}

/**
 * Validates the connection options and builds the pool (unless the caller gave one) and the
 * listener's connect path. `listenUrl` is the direct LISTEN connection string, if any (option or
 * environment); `preparedStatements` false means a transaction-mode pooler, where no session
 * setting may be sent.
 */
export function resolveClientConnections(
  options: ConnectionOptions,
  listenUrl: string | undefined,
  preparedStatements: boolean,
): ClientConnections {
  const timeouts = {
    statementTimeoutMs: optionalInt(
      options.statementTimeoutMs,
      'statementTimeoutMs',
      0,
      MAX_LEASE_MS,
      DEFAULT_STATEMENT_TIMEOUT_MS,
    ),
    connectTimeoutMs: optionalInt(
      options.connectTimeoutMs,
      'connectTimeoutMs',
      100,
      600_000,
      DEFAULT_CONNECT_TIMEOUT_MS,
    ),
    serverTimeout: preparedStatements,
    // The search_path is pinned at connect (a startup option), except behind a transaction pooler.
    pinSearchPath: preparedStatements,
  };
  let pool: pg.Pool;
  let statements: StatementWatch | null = null;
  let listen: ListenConnection | null = null;
  if (options.pool) {
    if (options.hosts !== undefined || options.targetSessionAttrs !== undefined) {
      throw new ValidationError(
        'hosts',
        'cannot be combined with pool: give connectionString and hosts instead',
      );
    }
    pool = options.pool;
  } else {
    const connectionString = options.connectionString ?? process.env.DATABASE_URL;
    if (!connectionString && options.hosts === undefined) {
      throw new ValidationError('connectionString', 'give connectionString or pool, or set DATABASE_URL');
    }
    const created = createLeaseholdPool({
      connection: resolveConnectionSettings({ ...options, connectionString }),
      max: optionalInt(options.poolSize, 'poolSize', 1, 1000, DEFAULT_POOL_SIZE),
      ...timeouts,
    });
    pool = created.pool;
    statements = created.watch;
    listen = created.listen;
  }
  let listenConnection: pg.ClientConfig;
  if (listenUrl !== undefined) {
    listenConnection = { connectionString: listenUrl };
    listen = listenConnectionFor({
      connection: resolveConnectionSettings({ connectionString: listenUrl }, 'listenConnectionString'),
      max: 1,
      ...timeouts,
    });
  } else {
    listenConnection = (pool as pg.Pool & { options: pg.ClientConfig }).options;
  }
  return {
    pool,
    ownsPool: !options.pool,
    statements,
    listenConnection,
    listenVia: listen ?? plainListenConnection(listenConnection),
  };
}
