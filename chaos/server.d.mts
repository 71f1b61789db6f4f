// Types of server.mjs, for the TypeScript tests that import it (test/support/restartable-postgres.ts).

/** How `startServer` sets the server up, besides its settings. */
export interface ServerOptions {
  /** initdb's arguments besides the data folder (default: the chaos harness's). */
  initdbArgs?: string[];
  /** Extra environment for every binary. */
  env?: Record<string, string>;
  /** Name of the temporary folder holding the data folder and the log. */
  tempPrefix?: string;
  /** Bound on each binary's run, in ms (default: none). */
  timeoutMs?: number;
  /** CIDR blocks whose TCP clients are trusted (pg_hba.conf), e.g. namespace addresses. */
  trustNetworks?: string[];
}

/** A running (or crashed) server on its own port and data folder. */
export interface Server {
  /** Connection string (trust authentication on loopback). */
  readonly connectionString: string;
  /** Its port, the same after every restart. */
  readonly port: number;
  /** Its data folder. */
  readonly dataDir: string;
  /** Its log file. */
  readonly logFile: string;
  /** Whether it was last started rather than crashed or destroyed. */
  readonly running: boolean;
  /** Starts it and waits until it accepts connections. */
  start(): Promise<void>;
  /** Stops it cleanly (a shutdown checkpoint). */
  stop(): Promise<void>;
  /** Stops it as a power cut would: no checkpoint, every backend killed. */
  crash(): Promise<void>;
  /** SIGKILL to the postmaster and every one of its processes; resolves with how many once all are gone. */
  kill(): Promise<number>;
  /** `pg_ctl promote` (a standby leaves recovery); resolves once it takes writes. */
  promote(): Promise<void>;
  /** Stops it (`fast` by default, or `immediate`) and removes its folder; safe to call twice. */
  destroy(mode?: 'fast' | 'immediate'): Promise<void>;
}

/** Starts a fresh server with `settings` (name -> value, as in postgresql.conf). */
export function startServer(settings?: Record<string, string>, options?: ServerOptions): Promise<Server>;

/** Makes a streaming standby of `primary` by a cold copy of its data folder, and starts it. */
export function startStandby(
  primary: Server,
  options?: { name?: string; settings?: Record<string, string> },
): Promise<Server>;
