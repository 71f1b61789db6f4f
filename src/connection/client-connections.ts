import type pg from 'pg';
import { MAX_LEASE_MS } from '../shared/config.js';
import { DEFAULT_POOL_SIZE } from '../shared/defaults.js';
import { ValidationError } from '../shared/errors.js';
import { optionalInt } from '../shared/validation.js';
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
 * How a client connects: the part of `LeaseholdOptions` this module reads, declared here (and
 * extended by `LeaseholdOptions`) so that connection/ needs nothing from the rooms above it.
 */
export interface ConnectionOptions {
  /**
   * PostgreSQL connection string; defaults to `DATABASE_URL`. Ignored when `pool` is given. May list
   * several hosts as libpq does (`postgres://u@a:5432,b:5432/db?target_session_attrs=read-write`):
   * see `hosts`.
   */
  connectionString?: string;
  /**
   * Servers to try in order (a primary and its standbys), beside a `connectionString` giving the
   * user, database and TLS settings. Each new connection goes to the one that fits
   * `targetSessionAttrs`, and after a failover to the new one. See docs/operations.md.
   */
  hosts?: readonly { host: string; port?: number }[];
  /**
   * Which host of a list to use, as libpq's `target_session_attrs`: `any` (default: the first that
   * answers), `read-write` (sessions may write) or `primary` (not in recovery). Overrides the URL's.
   */
  targetSessionAttrs?: TargetSessionAttrs;
  /**
   * Longest a statement may run on the pool Leasehold creates, in ms (default 30 s, the default
   * lease of a worker; 0: no limit). Set as `statement_timeout` on each connection (not behind a
   * transaction-mode pooler), and 5 s later the client gives up on a statement that got no answer at
   * all (a dead connection): it fails, and a lost outcome write is looked up before it is resent.
   */
  statementTimeoutMs?: number;
  /** Longest one connection attempt to one host may take, in ms (default 10 s). */
  connectTimeoutMs?: number;
  /** A pool of your own; Leasehold then never ends it. */
  pool?: pg.Pool;
  /** Connections in the pool Leasehold creates (default 10). */
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
