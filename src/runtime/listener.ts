import type pg from 'pg';
import type { ListenConnection } from '../connection/leasehold-pool.js';
import { quoteIdent } from '../storage/db.js';

/** Options of a wake-up listener. */
export interface ListenerOptions {
  /** How to open the listener's own connection, outside any pool (through the pool's host list). */
  connection: ListenConnection;
  /** The NOTIFY channel. */
  channel: string;
  /** Called with the queue name a notification carries. */
  onWake: (queue: string) => void;
  /** Called after every (re)connection: notifications may have been missed meanwhile. */
  onConnected: () => void;
  /** Connection problems, for logging; the listener reconnects by itself. */
  onError: (err: unknown) => void;
}

/**
 * Holds one LISTEN connection that runs nothing else, so operators can spot it in
 * pg_stat_activity (application_name `leasehold-listener`). Notifications only wake the worker:
 * the table stays the source of truth, and the worker's periodic poll drains it when a
 * notification is lost. On any error the connection is dropped and reopened with jittered backoff.
 */
export class WakeupListener {
  #client: pg.Client | null = null;
  #unwatch: (() => void) | null = null;
  #stopped = false;
  #attempt = 0;
  #retryTimer: NodeJS.Timeout | null = null;

  constructor(private readonly options: ListenerOptions) {}

  /** Connects and starts listening; never rejects (failures are retried). */
  start(): void {
    this.#stopped = false;
    this.#connectSafely();
  }

  /** Stops listening and closes the connection. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    const client = this.#client;
    this.#client = null;
    this.#unwatch?.();
    this.#unwatch = null;
    if (client) await client.end().catch(() => {});
  }

  /** The listener's server process id, while connected (for tests and diagnostics). */
  get backendPid(): number | null {
    const client = this.#client as (pg.Client & { processID?: number }) | null;
    return client?.processID ?? null;
  }

  // Whatever the connection attempt throws, synchronously or not, becomes a retry: never an
  // unhandled rejection (which ends a Node process under its defaults).
  #connectSafely(): void {
    let attempt: Promise<void>;
    try {
      attempt = this.#connect();
    } catch (err) {
      attempt = Promise.reject(err);
    }
    attempt.catch((err: unknown) => {
      if (this.#stopped) return;
      this.#reportError(err);
      this.#scheduleReconnect();
    });
  }

  async #connect(): Promise<void> {
    if (this.#stopped) return;
    const client = await this.options.connection.connect('leasehold-listener');
    let failed = false;
    // `err` null: the connection is left and made again, and nothing is reported.
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      unwatch();
      if (this.#client === client) {
        this.#client = null;
        this.#unwatch = null;
      }
      client.end().catch(() => {});
      if (this.#stopped) return;
      if (err !== null) this.#reportError(err);
      this.#scheduleReconnect();
    };
    // The host list gave this server up (read-only, shutting down): follow the pool to the new one.
    // Not a failure of its own: the statement whose failure made the host list give the server up
    // reports it (once per outage), and a reconnection that fails reports that. Reported here too,
    // it was a second error event for one outage, worded so that it was not counted as one.
    const unwatch = this.options.connection.watch(client, () => fail(null));
    client.on('error', fail);
    client.on('end', () => fail(new Error('listener connection ended')));
    client.on('notification', (message) => {
      if (message.payload) this.options.onWake(message.payload);
    });
    try {
      await client.query(`LISTEN ${quoteIdent(this.options.channel)}`);
    } catch (err) {
      fail(err);
      return;
    }
    if (this.#stopped || failed) {
      unwatch();
      await client.end().catch(() => {});
      return;
    }
    this.#client = client;
    this.#unwatch = unwatch;
    this.#attempt = 0;
    this.options.onConnected();
  }

  // The error callback must not break the retry loop either.
  #reportError(err: unknown): void {
    try {
      this.options.onError(err);
    } catch {
      // the listener keeps retrying whatever its error callback does
    }
  }

  #scheduleReconnect(): void {
    this.#attempt++;
    // Full jitter, capped at 5 s: many workers losing the server at once do not return in step.
    const delay = Math.random() * Math.min(5000, 100 * 2 ** this.#attempt);
    this.#retryTimer = setTimeout(() => this.#connectSafely(), delay);
    this.#retryTimer.unref();
  }
}
