import pg from 'pg';
import { DatabaseError } from '../shared/errors.js';
import { describeHost, type HostAddress, type TargetSessionAttrs } from './settings.js';
import type { StatementWatch } from './statement-watch.js';

/**
 * SQLSTATEs after which a connection is not worth keeping: 25006 (read-only transaction: the server
 * was demoted, or made read-only), 57P01/57P02 (administrator or crash shutdown) and 57P03 (cannot
 * connect now: starting up or shutting down). The next connection then goes through the host list.
 */
export const LEAVE_SERVER: ReadonlySet<string> = new Set(['25006', '57P01', '57P02', '57P03']);
/** How long a fitting host waits for hosts listed before it that have not answered yet. */
const PREFERENCE_GRACE_MS = 1000;
/** Driver errors saying the connection itself is gone or unreachable. */
export const CONNECTION_GONE: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/**
 * Finds, among a list of hosts, the one whose sessions fit `target_session_attrs` (libpq's
 * behaviour, which node-postgres lacks), and remembers it until a connection to it reports that it
 * no longer fits (read-only, shutting down, unreachable). Then the next connection tries the list
 * again in order. Concurrent connections share one search.
 */
export class PrimaryLocator {
  #current: HostAddress | null = null;
  #generation = 0;
  #finding: Promise<HostAddress> | null = null;
  readonly #lostListeners = new Set<(host: HostAddress) => void>();

  constructor(
    readonly hosts: readonly HostAddress[],
    readonly target: TargetSessionAttrs,
    private readonly probeConfig: pg.ClientConfig,
  ) {}

  /** The host to connect to: the last one found fitting, else the first of the list that fits. */
  current(): Promise<HostAddress> {
    if (this.#current) return Promise.resolve(this.#current);
    this.#finding ??= this.#find().finally(() => {
      this.#finding = null;
    });
    return this.#finding;
  }

  /** Counts the hosts given up: a connection made before the last one is on a server given up. */
  get generation(): number {
    return this.#generation;
  }

  /** A connection to `host` found it unfit or gone: forget it, and tell those watching. */
  lost(host: HostAddress): void {
    if (!this.#current || !sameHost(this.#current, host)) return;
    this.#current = null;
    this.#generation++;
    for (const listener of this.#lostListeners) listener(host);
  }

  /** Calls `listener` whenever the host in use is given up; returns the unsubscribe function. */
  onLost(listener: (host: HostAddress) => void): () => void {
    this.#lostListeners.add(listener);
    return () => this.#lostListeners.delete(listener);
  }

  // `any` keeps libpq's order: the first host that answers. A writable or primary session should
  // exist on one host only, so those probe every host at once: a dead first host that does not even
  // refuse (its machine is gone) then costs no connect timeout on every search. The list order still
  // decides between hosts that fit: a fitting host is taken once every host listed before it has
  // answered, or PREFERENCE_GRACE_MS after it fitted, whichever comes first.
  async #find(): Promise<HostAddress> {
    const errors: unknown[] = [];
    if (this.target === 'any') {
      for (const host of this.hosts) {
        if (await this.#probe(host, errors)) return this.#found(host);
      }
    } else {
      const found = await this.#probeAll(errors);
      if (found) return this.#found(found);
    }
    throw new DatabaseError(
      `none of the ${this.hosts.length} hosts (${this.hosts.map(describeHost).join(', ')}) accepted a ${this.target} session`,
      undefined,
      errors.at(-1),
    );
  }

  #probeAll(errors: unknown[]): Promise<HostAddress | null> {
    return new Promise((resolve) => {
      const answers: (boolean | undefined)[] = this.hosts.map(() => undefined);
      let grace: NodeJS.Timeout | null = null;
      let done = false;
      const decide = (force: boolean) => {
        if (done) return;
        const fit = answers.indexOf(true);
        const earlierPending = fit >= 0 && answers.slice(0, fit).includes(undefined);
        if (fit >= 0 && (!earlierPending || force)) {
          done = true;
          if (grace) clearTimeout(grace);
          resolve(this.hosts[fit] as HostAddress);
        } else if (fit >= 0) {
          grace ??= setTimeout(() => decide(true), PREFERENCE_GRACE_MS);
        } else if (!answers.includes(undefined)) {
          done = true;
          resolve(null);
        }
      };
      this.hosts.forEach((host, i) => {
        this.#probe(host, errors).then((fits) => {
          answers[i] = fits;
          decide(false);
        });
      });
    });
  }

  #found(host: HostAddress): HostAddress {
    this.#current = host;
    return host;
  }

  // Connects to one host, checks its session and disconnects; never rejects.
  async #probe(host: HostAddress, errors: unknown[]): Promise<boolean> {
    const probe = new pg.Client({ ...this.probeConfig, application_name: 'leasehold-probe' });
    aim(probe, host);
    probe.on('error', () => {});
    try {
      await probe.connect();
      return await sessionFits(probe, this.target);
    } catch (err) {
      errors.push(err);
      return false;
    } finally {
      await probe.end().catch(() => {});
    }
  }
}

/** True when two addresses name the same server. */
export function sameHost(a: HostAddress, b: HostAddress): boolean {
  return a.host === b.host && a.port === b.port;
}

// Points a client not yet connected at one host: pg reads host and port when it connects.
function aim(client: pg.Client, host: HostAddress): void {
  const target = client as unknown as { host: string; port: number };
  target.host = host.host;
  target.port = host.port;
}

/** Whether a connected session fits `target` (one round trip; none for `any`). */
async function sessionFits(client: pg.Client, target: TargetSessionAttrs): Promise<boolean> {
  if (target === 'any') return true;
  const { rows } = await client.query<{ read_only: boolean; in_recovery: boolean }>(
    `SELECT current_setting('transaction_read_only') = 'on' AS read_only, pg_is_in_recovery() AS in_recovery`,
  );
  const row = rows[0];
  return target === 'primary' ? row?.in_recovery === false : row?.read_only === false;
}

/** What a `LeaseholdClient` takes from its pool's settings (under the `leasehold` key). */
export interface ClientRoute {
  /** The host list to route through, or null for the one server of the settings. */
  locator: PrimaryLocator | null;
  /** Where outstanding statements are recorded, or null. */
  watch: StatementWatch | null;
  /** statement_timeout set on each new connection (0: none). */
  statementTimeoutMs: number;
}

type QueryCallback = (err: Error | undefined, result: unknown) => void;

/**
 * The `pg.Client` of the pools (and the listener) Leasehold creates. With a host list it connects
 * to the host the locator finds and checks the session fits before handing the connection out;
 * a connection answering that its server is read-only or going away (see LEAVE_SERVER) is closed,
 * so the pool drops it and the next connection reaches the new primary. Every statement is
 * recorded in the statement watch until answered; one that timed out on the client (`query_timeout`)
 * has its socket destroyed, since its answer can no longer be told from the next statement's.
 */
export class LeaseholdClient extends pg.Client {
  readonly #route: ClientRoute | undefined;
  #server: HostAddress | null = null;
  #generation = 0;

  constructor(config?: pg.ClientConfig & { leasehold?: ClientRoute }) {
    super(config);
    this.#route = config?.leasehold;
    // A connection the server ends (a FATAL 57P01 on an idle one) or the network breaks: the host
    // it was on is no longer known to be usable. Whoever holds the client still hears the error.
    this.on('error', (err: Error) => this.#answeredWith(err));
  }

  /** The host this client connected to through a host list (null without one). */
  get server(): HostAddress | null {
    return this.#server;
  }

  /** True once the host list gave up the server this client is on: the pool should drop it. */
  get stale(): boolean {
    const locator = this.#route?.locator;
    return locator != null && this.#server != null && locator.generation !== this.#generation;
  }

  override connect(): Promise<pg.Client>;
  override connect(callback: (err: Error | null, client?: pg.Client) => void): void;
  // biome-ignore lint/suspicious/noExplicitAny: matches pg's overloads, whose callback types differ.
  override connect(callback?: (err: any, client?: any) => void): Promise<pg.Client> | undefined {
    const connecting = this.#connect().then(() => this as pg.Client);
    if (!callback) return connecting;
    connecting.then(
      (client) => callback(null, client),
      (err: Error) => callback(err),
    );
    return undefined;
  }

  async #connect(): Promise<void> {
    await this.#reachServer();
    const timeout = this.#route?.statementTimeoutMs ?? 0;
    if (timeout <= 0) return;
    try {
      // A SET rather than a startup parameter: PgBouncer refuses unknown startup parameters.
      await this.query(`SET statement_timeout = ${Math.floor(timeout)}`);
    } catch (err) {
      // The pool drops a client whose connect failed, but only this end closes its connection.
      await this.end().catch(() => {});
      throw err;
    }
  }

  async #reachServer(): Promise<void> {
    const locator = this.#route?.locator;
    if (!locator) {
      await super.connect();
      return;
    }
    const generation = locator.generation;
    const host = await locator.current();
    aim(this, host);
    this.#server = host;
    this.#generation = generation;
    try {
      await super.connect();
    } catch (err) {
      locator.lost(host);
      throw err;
    }
    let fits: boolean;
    try {
      fits = await sessionFits(this, locator.target);
    } catch (err) {
      locator.lost(host);
      await this.end().catch(() => {});
      throw err;
    }
    if (!fits) {
      locator.lost(host);
      await this.end().catch(() => {});
      throw new DatabaseError(
        `${describeHost(host)} no longer accepts a ${locator.target} session; the next connection tries the host list again`,
        '25006',
        undefined,
      );
    }
  }

  // biome-ignore lint/suspicious/noExplicitAny: pg.Client.query has a dozen overloads; this forwards them all.
  override query(...args: any[]): any {
    const watch = this.#route?.watch ?? null;
    const handle = watch?.begin(args[0]) ?? -1;
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last] as QueryCallback;
      args[last] = (err: Error | undefined, result: unknown) => {
        watch?.end(handle);
        if (err) this.#answeredWith(err);
        callback(err, result);
      };
      return super.query(...(args as Parameters<pg.Client['query']>));
    }
    const result = super.query(...(args as Parameters<pg.Client['query']>)) as unknown;
    if (result && typeof (result as Promise<unknown>).then === 'function') {
      (result as Promise<unknown>).then(
        () => watch?.end(handle),
        (err: Error) => {
          watch?.end(handle);
          this.#answeredWith(err);
        },
      );
    } else {
      watch?.end(handle); // a Submittable (cursor, stream): not tracked
    }
    return result;
  }

  #answeredWith(err: Error): void {
    const code = (err as { code?: unknown }).code;
    if (err.message === 'Query read timeout') {
      // The statement may still answer, and pg would take that answer for the next statement's.
      (this as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
      if (this.#server) this.#route?.locator?.lost(this.#server);
      return;
    }
    if (typeof code !== 'string') return;
    if (LEAVE_SERVER.has(code)) {
      if (this.#server) this.#route?.locator?.lost(this.#server);
      this.end().catch(() => {});
    } else if (CONNECTION_GONE.has(code) && this.#server) {
      this.#route?.locator?.lost(this.#server);
    }
  }
}
