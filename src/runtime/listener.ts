import pg from 'pg';
import { quoteIdent } from '../storage/db.js';

/** Options of a wake-up listener. */
export interface ListenerOptions {
  /** Connection settings; the listener opens its own connection, outside any pool. */
  connection: pg.ClientConfig;
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
  #stopped = false;
  #attempt = 0;
  #retryTimer: NodeJS.Timeout | null = null;

  constructor(private readonly options: ListenerOptions) {}

  /** Connects and starts listening; never rejects (failures are retried). */
  start(): void {
    this.#stopped = false;
    void this.#connect();
  }

  /** Stops listening and closes the connection. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    const client = this.#client;
    this.#client = null;
    if (client) await client.end().catch(() => {});
  }

  /** The listener's server process id, while connected (for tests and diagnostics). */
  get backendPid(): number | null {
    const client = this.#client as (pg.Client & { processID?: number }) | null;
    return client?.processID ?? null;
  }

  async #connect(): Promise<void> {
    if (this.#stopped) return;
    const client = new pg.Client({ ...this.options.connection, application_name: 'leasehold-listener' });
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      if (this.#client === client) this.#client = null;
      client.end().catch(() => {});
      if (this.#stopped) return;
      this.options.onError(err);
      this.#scheduleReconnect();
    };
    client.on('error', fail);
    client.on('end', () => fail(new Error('listener connection ended')));
    client.on('notification', (message) => {
      if (message.payload) this.options.onWake(message.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(this.options.channel)}`);
    } catch (err) {
      fail(err);
      return;
    }
    if (this.#stopped || failed) {
      await client.end().catch(() => {});
      return;
    }
    this.#client = client;
    this.#attempt = 0;
    this.options.onConnected();
  }

  #scheduleReconnect(): void {
    this.#attempt++;
    // Full jitter, capped at 5 s: many workers losing the server at once do not return in step.
    const delay = Math.random() * Math.min(5000, 100 * 2 ** this.#attempt);
    this.#retryTimer = setTimeout(() => void this.#connect(), delay);
    this.#retryTimer.unref();
  }
}
