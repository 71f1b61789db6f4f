import type pg from 'pg';
import { resolveClientConnections } from '../connection/client-connections.js';
import type { ListenConnection } from '../connection/leasehold-pool.js';
import type { StatementWatch } from '../connection/statement-watch.js';
import { ClaimRouter } from '../runtime/claim/claim-router.js';
import { resolveBackoff } from '../shared/config.js';
import {
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_SCHEMA,
  DEFAULT_SUCCEEDED_RETENTION_MS,
  DEFAULT_WAIT_POLL_INTERVAL_MS,
  WAKEUP_WINDOW_MS,
} from '../shared/defaults.js';
import { ClientClosedError, inOperation, ValidationError } from '../shared/errors.js';
import { poolerDefaults } from '../shared/pooler-env.js';
import { rejectUnknownOptions } from '../shared/unknown-options.js';
import {
  assertSchemaName,
  MAX_PAYLOAD_BYTES_LIMIT,
  optionalBoolean,
  optionalInt,
  optionsObject,
} from '../shared/validation.js';
import {
  type Queryable,
  quoteIdent,
  routeOn,
  routeOnPool,
  runUnnamedOn,
  runUnnamedOnPool,
} from '../storage/db.js';
import { notifyQueue } from '../storage/jobs/enqueue.js';
import { functionRoutes } from '../storage/roles/functions.js';
import type { LeaseholdOptions } from './client-options.js';
import { type CombineLimits, EnqueueCombiner } from './enqueue-combiner.js';
import { JobWaiters } from './job-waiters.js';
import { WakeupCoalescer } from './wakeup-coalescer.js';

/** Every option `new Leasehold()` accepts (checked for typos at construction). */
/** Option names `new Leasehold()` takes (docs/api.md lists each: test/interfaces/docs-options.test.ts). */
export const KNOWN_OPTIONS: readonly (keyof LeaseholdOptions)[] = [
  'connectionString',
  'pool',
  'poolSize',
  'schema',
  'backoff',
  'maxPayloadBytes',
  'succeededRetentionMs',
  'preparedStatements',
  'viaFunctions',
  'listen',
  'listenConnectionString',
  'hosts',
  'targetSessionAttrs',
  'statementTimeoutMs',
  'connectTimeoutMs',
  'combineEnqueues',
];

/**
 * Everything a Leasehold client resolved from its options, once, at construction: the seam between
 * the public client and the rooms below it. Every public call, the worker, the maintenance services
 * and the dashboard take this record (or the narrow part they need), never the client itself.
 * It holds connection settings (the listen connection may carry a password), so it is not public.
 */
export interface LeaseholdContext {
  /** The pool every statement runs on (unless a call passes its own client). */
  readonly pool: pg.Pool;
  /** Whether `pool` was created here, and so is ended by `closeContext`. */
  readonly ownsPool: boolean;
  /** The validated schema name. */
  readonly schema: string;
  /** The schema, quoted for SQL text. */
  readonly quotedSchema: string;
  /** False when statements run unnamed (behind a transaction-mode pooler). */
  readonly preparedStatements: boolean;
  /** True when transitions run through the schema's functions (the producer and worker roles). */
  readonly viaFunctions: boolean;
  /** Whether workers listen for wake-ups by default. */
  readonly listen: boolean;
  /** Settings of the workers' LISTEN connection (a direct one, or the pool's). */
  readonly listenConnection: pg.ClientConfig;
  /** How workers open their LISTEN connection: through the same host list as the pool. */
  readonly listenVia: ListenConnection;
  /** Statements outstanding on the pool Leasehold created; null for a pool of the caller's. */
  readonly statements: StatementWatch | null;
  /** Resolved retry backoff. */
  readonly backoff: Required<{ baseMs: number; maxMs: number }>;
  /** Largest payload accepted, in JSON bytes. */
  readonly maxPayloadBytes: number;
  /** Default retention of succeeded jobs, in ms. */
  readonly succeededRetentionMs: number;
  /** Autocommit enqueues share one wake-up per queue per window (see context/wakeup-coalescer.ts). */
  readonly wakeups: WakeupCoalescer;
  /** Concurrent autocommit enqueues share statements (context/enqueue-combiner.ts); null: `combineEnqueues: false`. */
  readonly enqueues: EnqueueCombiner | null;
  /** `lh.claim`'s claim router: strict preference order, no claim floor (workers have their own). */
  readonly claims: ClaimRouter;
  /** `lh.waitFor`'s shared waits: one LISTEN connection (when `listen`) and one poll (see context/job-waiters.ts). */
  readonly waiters: JobWaiters;
}

/** Validates `LeaseholdOptions` (unknown keys included) and builds the context, creating a pool if none is given. */
export function resolveContext(given: LeaseholdOptions = {}): LeaseholdContext {
  const options = optionsObject(given);
  rejectUnknownOptions(options, KNOWN_OPTIONS, 'options');
  const schema = options.schema ?? DEFAULT_SCHEMA;
  assertSchemaName(schema);
  const backoff = resolveBackoff(options.backoff, 'backoff');
  const maxPayloadBytes = optionalInt(
    options.maxPayloadBytes,
    'maxPayloadBytes',
    2,
    MAX_PAYLOAD_BYTES_LIMIT,
    DEFAULT_MAX_PAYLOAD_BYTES,
  );
  const succeededRetentionMs = optionalInt(
    options.succeededRetentionMs,
    'succeededRetentionMs',
    0,
    10 * 365 * 86_400_000,
    DEFAULT_SUCCEEDED_RETENTION_MS,
  );
  if (
    options.listenConnectionString !== undefined &&
    (typeof options.listenConnectionString !== 'string' || options.listenConnectionString === '')
  ) {
    throw new ValidationError('listenConnectionString', 'must be a non-empty connection string');
  }
  const defaults = poolerDefaults(process.env, options.listenConnectionString);
  const preparedStatements = optionalBoolean(
    options.preparedStatements,
    'preparedStatements',
    defaults.preparedStatements,
  );
  const listen = optionalBoolean(options.listen, 'listen', defaults.listen);
  const combineEnqueues = optionalBoolean(options.combineEnqueues, 'combineEnqueues', true);
  // LEASEHOLD_VIA_FUNCTIONS=1 sets the default, so that the CLI (`leasehold work`) runs under a role.
  const viaFunctions = optionalBoolean(
    options.viaFunctions,
    'viaFunctions',
    process.env.LEASEHOLD_VIA_FUNCTIONS === '1',
  );
  // Host lists, timeouts, keepalive and the pinned search_path: see src/connection/.
  const connections = resolveClientConnections(options, defaults.listenConnectionString, preparedStatements);
  const { pool, ownsPool, listenConnection, listenVia, statements } = connections;
  if (!preparedStatements) runUnnamedOnPool(pool);
  if (viaFunctions) routeOnPool(pool, functionRoutes(schema));
  return {
    pool,
    ownsPool,
    schema,
    quotedSchema: quoteIdent(schema),
    preparedStatements,
    viaFunctions,
    listen,
    listenConnection,
    listenVia,
    statements,
    backoff,
    maxPayloadBytes,
    succeededRetentionMs,
    wakeups: new WakeupCoalescer(WAKEUP_WINDOW_MS, (queue) => notifyQueue(pool, schema, queue)),
    enqueues: combineEnqueues ? new EnqueueCombiner(combineLimits(pool)) : null,
    claims: new ClaimRouter(pool, schema, null),
    waiters: new JobWaiters({ pool, schema, listen, listenVia }, DEFAULT_WAIT_POLL_INTERVAL_MS),
  };
}

/**
 * Combining's bounds on `pool`: a quarter of its connections in enqueue statements at once (at
 * least one; the rest stay for workers and other calls; one per queue and kind), a thousand rows
 * and 4 MB of payload JSON per statement. 16 callers of one queue send 16 rows a statement, and
 * each commit is shared by that many callers.
 */
function combineLimits(pool: pg.Pool): CombineLimits {
  const size = (pool as { options?: { max?: number } }).options?.max ?? 10;
  return { maxInFlight: Math.max(1, Math.floor(size / 4)), maxRows: 1000, maxBytes: 4 * 1024 * 1024 };
}

// Contexts whose client was closed: every later public call rejects with CLIENT_CLOSED.
const closed = new WeakSet<LeaseholdContext>();

/**
 * Runs the public call `operation` of a client: refused with `ClientClosedError` once the client is
 * closed, and a database error it raises names `operation` rather than the statement it ran.
 */
export function publicCall<T>(
  context: LeaseholdContext,
  operation: string,
  run: () => Promise<T>,
): Promise<T> {
  if (closed.has(context)) return Promise.reject(new ClientClosedError(operation));
  return run().catch((err: unknown) => {
    throw inOperation(err, operation);
  });
}

/**
 * Throws `ClientClosedError` when the client of `context` was closed (for calls that return no
 * promise); returns the context, so a forward can check and use it in one expression.
 */
export function assertOpen(context: LeaseholdContext, operation: string): LeaseholdContext {
  if (closed.has(context)) throw new ClientClosedError(operation);
  return context;
}

/** Sends pending wake-ups, ends open waits, and ends the pool if the context created it. */
export async function closeContext(context: LeaseholdContext): Promise<void> {
  if (closed.has(context)) return;
  closed.add(context);
  await context.waiters.close();
  await context.enqueues?.drained();
  await context.wakeups.flush();
  if (context.ownsPool) await context.pool.end();
}

/**
 * The connection a call runs on: the caller's client (inside their transaction), else the pool.
 * A caller's client is set to run statements unnamed, and through the schema's functions, when the
 * context does.
 */
export function connectionFor(context: LeaseholdContext, client: Queryable | undefined): Queryable {
  if (client === undefined) return context.pool;
  if (!context.preparedStatements) runUnnamedOn(client);
  if (context.viaFunctions) routeOn(client, functionRoutes(context.schema));
  return client;
}

/**
 * Options whose `client` joins the caller's transaction: registers it to run unnamed behind a
 * pooler (as `connectionFor` does) and returns the options unchanged.
 */
export function joining<T>(context: LeaseholdContext, options: T): T {
  const client = (options as { client?: unknown } | null | undefined)?.client;
  if (typeof client === 'object' && client !== null) connectionFor(context, client as Queryable);
  return options;
}
