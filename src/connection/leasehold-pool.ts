import pg from 'pg';
import { INDEX_PLANS_OPTION, pinnedSearchPath } from '../storage/search-path.js';
import { type ClientRoute, LeaseholdClient, PrimaryLocator, sameHost } from './primary.js';
import type { ConnectionSettings } from './settings.js';
import { StatementWatch } from './statement-watch.js';

/** Default `statementTimeoutMs`: a worker's default lease, since a statement outliving its lease is lost work anyway. */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
/** Default `connectTimeoutMs`: how long one connection attempt to one host may take. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Idle time before TCP keepalive probes start on Leasehold's connections. */
export const KEEPALIVE_INITIAL_DELAY_MS = 10_000;
// The client-side timer gives the server's statement_timeout time to answer first (with a clear
// SQLSTATE 57014); it fires only when no answer can arrive: a dead connection or a paused server.
const CLIENT_TIMEOUT_MARGIN_MS = 5_000;

/** How Leasehold builds its pool. */
export interface PoolSettings {
  connection: ConnectionSettings;
  /** Connections in the pool. */
  max: number;
  /** Server-side statement_timeout, and (plus a margin) the client-side one; 0 turns both off. */
  statementTimeoutMs: number;
  /** Per connection attempt, per host. */
  connectTimeoutMs: number;
  /**
   * Set statement_timeout on each new connection (one SET per connection, not per job). False behind
   * a transaction-mode pooler, where a session setting would leak to other clients' transactions.
   */
  serverTimeout: boolean;
  /** Pin the search_path at connect (see storage/search-path.ts); false behind a transaction pooler. */
  pinSearchPath: boolean;
}

/** A pool Leasehold created, with what routes and watches its connections. */
export interface LeaseholdPool {
  pool: pg.Pool;
  /** Statements outstanding on the pool's connections. */
  watch: StatementWatch;
  /** How the workers' LISTEN connection reaches the same server as the pool. */
  listen: ListenConnection;
}

/** How a wake-up listener opens its connection. */
export interface ListenConnection {
  /** Opens a connected client for `applicationName` (the caller ends it). */
  connect(applicationName: string): Promise<pg.Client>;
  /** Calls `lost` once the server `client` is on is given up by the host list; returns an unsubscribe. */
  watch(client: pg.Client, lost: () => void): () => void;
}

/**
 * Builds the pool Leasehold owns: TCP keepalive on (a silently dead peer is found while idle),
 * statements bounded by `statementTimeoutMs` on the server and, with a margin, on the client (a
 * black-holed connection or a paused server answers nothing, and a statement waiting forever would
 * hold its outcome batch), connection attempts bounded, and, with a host list, every connection
 * routed to the host that fits `target_session_attrs` (see primary.ts).
 */
export function createLeaseholdPool(settings: PoolSettings): LeaseholdPool {
  const watch = new StatementWatch();
  const common = clientSettings(settings);
  const hosts = settings.connection.hosts;
  const locator = hosts ? new PrimaryLocator(hosts, settings.connection.targetSessionAttrs, common) : null;
  const pool = new pg.Pool({
    ...common,
    max: settings.max,
    application_name: 'leasehold',
    types: LEASEHOLD_TYPES,
    Client: LeaseholdClient as unknown as typeof pg.Client,
    leasehold: {
      locator,
      watch,
      statementTimeoutMs: settings.serverTimeout ? settings.statementTimeoutMs : 0,
    } satisfies ClientRoute,
  } as pg.PoolConfig);
  // An idle client losing its connection (a server restart) must not crash the process;
  // the next query on a fresh connection reports the error where it can be handled.
  pool.on('error', () => {});
  // A connection whose server the host list gave up (another one answered read-only or went away)
  // is closed as it comes back, so the pool does not keep serving reads from a demoted server; pg
  // drops a client that is ending when it is released.
  if (locator) {
    pool.on('release', (_err: unknown, client: pg.PoolClient) => {
      if (client instanceof LeaseholdClient && client.stale) client.end().catch(() => {});
    });
  }
  return { pool, watch, listen: routedListenConnection(common, locator) };
}

const INT8_OID = 20;
const keepText = (value: string): string => value;
// node-postgres' own int8 parser, unless an app replaced it before this module loaded.
const PG_INT8_PARSER = pg.types.getTypeParser(INT8_OID, 'text');
const PG_INT8_IS_DEFAULT = PG_INT8_PARSER.name === 'parseBigInteger';

/**
 * node-postgres' type parsers, as the app has them, except that its default bigint (int8) parser
 * is replaced by one that keeps the text as it comes: the same strings, without the regular
 * expression the default tests each value with first (three int8 columns per claimed row: id,
 * token, claim id). An app's own int8 parser (`pg.types.setTypeParser(20, ...)`) is kept.
 */
const LEASEHOLD_TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    const parser = pg.types.getTypeParser(oid, format as 'text');
    return oid === INT8_OID && PG_INT8_IS_DEFAULT && parser === PG_INT8_PARSER ? keepText : parser;
  }) as typeof pg.types.getTypeParser,
};

/** The listen connection for settings of its own (`listenConnectionString`): routed like a pool. */
export function listenConnectionFor(settings: PoolSettings): ListenConnection {
  const common = clientSettings(settings);
  const hosts = settings.connection.hosts;
  const locator = hosts ? new PrimaryLocator(hosts, settings.connection.targetSessionAttrs, common) : null;
  return routedListenConnection(common, locator);
}

/** A listen connection opened from plain `pg` settings (a pool the caller gave), as before. */
export function plainListenConnection(config: pg.ClientConfig): ListenConnection {
  return {
    async connect(applicationName) {
      const client = new pg.Client({ ...config, application_name: applicationName });
      await connectGuarded(client);
      return client;
    },
    watch: () => () => {},
  };
}

function clientSettings(settings: PoolSettings): pg.ClientConfig {
  const timeout = settings.statementTimeoutMs;
  // The user's startup options first, the pinned search_path (and the planner setting the lanes
  // need, see INDEX_PLANS_OPTION) last: of two settings of one name at connect, the last wins, so a
  // URL's options can add settings but not unpin the path.
  const options = [
    settings.connection.base.options,
    pinnedSearchPath(settings.pinSearchPath).options,
    settings.pinSearchPath ? INDEX_PLANS_OPTION : undefined,
  ]
    .filter((part) => part !== undefined)
    .join(' ');
  return {
    ...settings.connection.base,
    ...(options !== '' ? { options } : {}),
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS,
    connectionTimeoutMillis: settings.connectTimeoutMs,
    ...(timeout > 0 ? { query_timeout: timeout + CLIENT_TIMEOUT_MARGIN_MS } : {}),
  };
}

function routedListenConnection(common: pg.ClientConfig, locator: PrimaryLocator | null): ListenConnection {
  // LISTEN waits for notifications, not answers: no statement timeout on this connection.
  const { query_timeout: _client, ...config } = common;
  return {
    async connect(applicationName) {
      const client = new LeaseholdClient({
        ...config,
        application_name: applicationName,
        leasehold: { locator, watch: null, statementTimeoutMs: 0 },
      });
      await connectGuarded(client);
      return client;
    },
    watch(client, lost) {
      const server = client instanceof LeaseholdClient ? client.server : null;
      if (!locator || !server) return () => {};
      return locator.onLost((host) => {
        if (sameHost(host, server)) lost();
      });
    },
  };
}

// Until the caller attaches its own handlers, an 'error' event must not crash the process.
async function connectGuarded(client: pg.Client): Promise<void> {
  const ignore = () => {};
  client.on('error', ignore);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => {});
    throw err;
  } finally {
    client.off('error', ignore);
  }
}
