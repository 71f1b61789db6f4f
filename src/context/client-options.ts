import type { ConnectionOptions } from '../connection/client-connections.js';
import type { BackoffOptions } from '../shared/config.js';
import type { Queryable } from '../storage/db.js';

export type { Queryable } from '../storage/db.js';

/** Options of a `Leasehold` client (how it connects: `ConnectionOptions`, documented there). */
export interface LeaseholdOptions extends ConnectionOptions {
  /** The PostgreSQL schema holding Leasehold's tables (default `leasehold`). */
  schema?: string;
  /** Retry backoff for failures and expired leases. */
  backoff?: BackoffOptions;
  /** Largest payload accepted, as JSON bytes (default 256 KiB). */
  maxPayloadBytes?: number;
  /** How long succeeded jobs are kept before retention removes them (default 1 hour); per queue: `configureQueue`. */
  succeededRetentionMs?: number;
  /**
   * Prepare each statement once per connection (default true, or false under
   * `LEASEHOLD_POOLER=transaction`). Set false behind a pooler in transaction mode that does not
   * track prepared statements (PgBouncer before 1.21): statements then run unnamed, on the pool and
   * on clients you pass in. See docs/operators-guide.md.
   */
  preparedStatements?: boolean;
  /**
   * Run enqueues and worker transitions through the schema's SECURITY DEFINER functions instead of
   * as direct statements (default false): set it when the client connects as a login granted
   * `<schema>_producer` or `<schema>_worker`, which may not write the tables. Same parameters,
   * same rows, still one statement per batch; `getJob` then reads no payload. Applies to clients
   * you pass in too. Default: true when the environment sets `LEASEHOLD_VIA_FUNCTIONS=1` (for the
   * CLI's `leasehold work`). See "Database roles" in docs/operators-guide.md.
   */
  viaFunctions?: boolean;
  /**
   * Whether this client's workers LISTEN for wake-ups unless a worker sets its own `listen`
   * (default true; under `LEASEHOLD_POOLER=transaction`, only with a listen connection string).
   */
  listen?: boolean;
  /**
   * A direct (session) connection string for the workers' LISTEN connection, beside a pooled
   * `connectionString` or `pool`: LISTEN needs a session of its own. Default:
   * `LEASEHOLD_LISTEN_DATABASE_URL`, else the pool's settings.
   */
  listenConnectionString?: string;
  /**
   * Whether concurrent `enqueue()` calls without `client` share statements (default true): while
   * one is in flight, the next calls wait and go together as one multi-row statement when it
   * returns; each still resolves with its own id only once its row committed. False: one statement
   * per call. See "Write combining" in docs/api.md.
   */
  combineEnqueues?: boolean;
}

/** Options of `enqueue`. */
export interface EnqueueOptions {
  /** Higher runs first (a preference, not a promise). Default 0. */
  priority?: number;
  /** Earliest time to run, compared with database time. */
  runAt?: Date;
  /** Delay before the job may run, from database time at insert. */
  delayMs?: number;
  /** Attempts allowed in all (default 8). */
  maxAttempts?: number;
  /** Your own client inside an open transaction: the job commits or rolls back with it. */
  client?: Queryable;
  /**
   * At most one job per queue and key while that job is kept (until retention removes it): a later
   * enqueue with the same key returns the existing job's id with `created: false` (1 to 200 characters).
   */
  idempotencyKey?: string;
  /**
   * Jobs of a queue sharing this key run one at a time, in enqueue order; a dead one blocks the key
   * until replayed or skipped (1 to 200 characters). See docs/ordering.md.
   */
  orderingKey?: string;
  /** Counts against the queue's `concurrencyLimitPerKey` (1 to 200 characters). */
  concurrencyKey?: string;
  /**
   * The key this job takes turns under on a queue with `fairness: 'round-robin'` (a tenant, a
   * customer; 1 to 200 characters). Ignored by other queues. Not with `dedupe` (yet).
   */
  fairnessKey?: string;
  /** Throttle, debounce or replace jobs sharing a key (not with `idempotencyKey`): see `DedupeOptions`. */
  dedupe?: DedupeOptions;
}

/**
 * Deduplication of an enqueue by key (per queue; see "Deduplication modes" in docs/api.md):
 * `throttle` keeps the first job of each window, `debounce` runs one job `windowMs` after the last
 * enqueue, `replace` rewrites the pending job or cancels the running one and queues anew.
 */
export interface DedupeOptions {
  /** The key (1 to 200 characters), shared by every mode within a queue. */
  key: string;
  /** `throttle`, `debounce` or `replace`. */
  mode: 'throttle' | 'debounce' | 'replace';
  /** Window in ms, database time (1 ms to 366 days): required by throttle and debounce, refused by replace. */
  windowMs?: number;
}

/** What `enqueue` returns. */
export interface EnqueueResult {
  /** The job's id (the existing job's, when an idempotency key was already taken). */
  id: string;
  /** False when an idempotency or dedupe key named an existing job and no job was inserted. */
  created: boolean;
  /** With `dedupe: { mode: 'replace' }`: the running job this enqueue cancelled and replaced. */
  cancelledJobId?: string;
}

/** What `enqueueMany` returns. */
export interface EnqueueManyResult {
  /** Job ids in input order (items folded by a dedupe key repeat the surviving job's id). */
  ids: string[];
  /** Present when an item had `dedupe`: per item, whether it inserted the job it names. */
  created?: boolean[];
}

/** Options of `prune`. */
export interface PruneOptions {
  /** Rows per statement (1..1000, default 1000), each its own short transaction. */
  batchSize?: number;
  /** Most rows of each kind removed by this call (default 1,000,000). */
  limit?: number;
}

/** One job of `enqueueMany`. */
export interface EnqueueItem {
  /** The job's data (JSON). */
  payload: unknown;
  /** Higher runs first. */
  priority?: number;
  /** Earliest time to run. */
  runAt?: Date;
  /** Delay before the job may run. */
  delayMs?: number;
  /** Attempts allowed in all. */
  maxAttempts?: number;
  /** Per-aggregate ordering key: see `EnqueueOptions.orderingKey`. */
  orderingKey?: string;
  /** Per-key concurrency key: see `EnqueueOptions.concurrencyKey`. */
  concurrencyKey?: string;
  /** Fairness key: see `EnqueueOptions.fairnessKey`. */
  fairnessKey?: string;
  /** Deduplication by key: see `EnqueueOptions.dedupe` (duplicates inside one batch fold first). */
  dedupe?: DedupeOptions;
}

/** Options of `claim`. */
export interface ClaimOptions {
  /** Queue to claim from. */
  queue: string;
  /** Who claims: recorded as the lease owner and required by every later write. */
  owner: string;
  /** Most jobs to claim (1..1000, default 1). */
  limit?: number;
  /** Lease length in ms (default 30 s, `DEFAULT_LEASE_MS`, the same as workers'). */
  leaseMs?: number;
}

/** Options of `fail`. */
export interface FailOptions {
  /** False sends the job straight to `dead`. Default true. */
  retryable?: boolean;
  /** Retry after exactly this delay instead of the jittered backoff. */
  delayMs?: number;
  /** Retry only while attempt < this budget (smaller than maxAttempts for unclassified errors). */
  attemptBudget?: number;
  /** Stored error code; defaults to the error's own `code`, else `ERROR`. */
  code?: string;
  /** Record the failure inside this transaction (a `pg` client, or an adapter from `leasehold/kysely`...). */
  client?: Queryable;
}
