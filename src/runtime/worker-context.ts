import type pg from 'pg';
import type { ListenConnection } from '../connection/leasehold-pool.js';
import type { StatementWatch } from '../connection/statement-watch.js';

/**
 * The narrow part of the resolved client context a worker needs (see src/context/context.ts): a worker is
 * built from this, never from the public client, so the runtime depends on nothing above it.
 * `LeaseholdContext` satisfies it; so does any record with these fields.
 */
export interface WorkerContext {
  /** The pool claims, renewals and outcomes run on. */
  readonly pool: pg.Pool;
  /** The validated schema. */
  readonly schema: string;
  /** The client's retry backoff, each queue's default. */
  readonly backoff: { readonly baseMs: number; readonly maxMs: number };
  /** Whether the worker listens for wake-ups unless its own `listen` says otherwise. */
  readonly listen: boolean;
  /** Settings of the LISTEN connection. */
  readonly listenConnection: pg.ClientConfig;
  /** How to open the LISTEN connection through the pool's host list (default: from `listenConnection`). */
  readonly listenVia?: ListenConnection;
  /** Statements outstanding on the pool, for the `stalled` event (none watched when absent). */
  readonly statements?: StatementWatch | null;
  /** Default retention of succeeded jobs, for the worker's retention pass. */
  readonly succeededRetentionMs: number;
}
