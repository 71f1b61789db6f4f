import { CONNECTION_GONE, LEAVE_SERVER } from './primary.js';

// SQLSTATEs of "no session": connection exceptions (08), bad credentials (28), no such database
// (3D000), the server starting, restarting or shutting down (57P0x), a read-only standby (25006).
const NO_SESSION_STATE = /^(08|28)|^3D000$/;
// Node's socket errors (ECONNREFUSED, ENOTFOUND, EHOSTUNREACH), as the driver passes them on.
const SOCKET_CODE = /^E[A-Z]+$/;
// Driver messages of a connection that ended, or was never made, without a code. "timeout expired"
// is pg's own connect timer (connectTimeoutMs) on a client outside a pool: the LISTEN connection's,
// a host-list probe's. A pool words the same failure "Connection terminated due to connection
// timeout"; unmatched, the listener reconnecting into a black hole was one more event per attempt.
const CONNECTION_MESSAGE =
  /Connection terminated|Connection ended|Query read timeout|timeout exceeded when trying to connect|^timeout expired$|Client has encountered a connection error|not queryable/i;

/**
 * True when `err` (a Leasehold error, a driver error, or an error wrapping one as `cause`) says the
 * database could not be reached or the session was lost, rather than that a statement was refused:
 * what the CLI explains as "cannot use the database" and a worker reports once per outage.
 */
export function isConnectionFailure(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 4) return false;
  const e = err as {
    sqlState?: unknown;
    errno?: unknown;
    code?: unknown;
    message?: unknown;
    cause?: unknown;
  };
  for (const code of [e.sqlState, e.errno, e.code]) {
    if (typeof code !== 'string') continue;
    if (NO_SESSION_STATE.test(code) || LEAVE_SERVER.has(code)) return true;
    if (CONNECTION_GONE.has(code) || SOCKET_CODE.test(code)) return true;
  }
  if (typeof e.message === 'string' && CONNECTION_MESSAGE.test(e.message)) return true;
  if (err instanceof AggregateError && err.errors.some((inner) => isConnectionFailure(inner, depth + 1))) {
    return true;
  }
  return isConnectionFailure(e.cause, depth + 1);
}

/**
 * `host:port` of the server a failure was about (the socket error's own address, else the pool's
 * settings), for a message an operator reads: never the user, the password or the database.
 */
export function serverOf(err: unknown, pool: { options?: unknown } | null): string {
  const socket = socketAddress(err, 0);
  if (socket !== null) return socket;
  const options = (pool?.options ?? {}) as { host?: unknown; port?: unknown; connectionString?: unknown };
  let host = typeof options.host === 'string' ? options.host : undefined;
  let port =
    typeof options.port === 'number' || typeof options.port === 'string' ? String(options.port) : undefined;
  if (typeof options.connectionString === 'string') {
    try {
      const url = new URL(options.connectionString);
      host ??= decodeURIComponent(url.hostname) || undefined;
      port ??= url.port || undefined;
      host ??= url.searchParams.get('host') ?? undefined;
    } catch {
      // A keyword/value string: the host is not worth a parser here.
    }
  }
  return `${host ?? process.env.PGHOST ?? 'localhost'}:${port ?? process.env.PGPORT ?? '5432'}`;
}

function socketAddress(err: unknown, depth: number): string | null {
  if (typeof err !== 'object' || err === null || depth > 4) return null;
  const e = err as { address?: unknown; port?: unknown; cause?: unknown };
  if (typeof e.address === 'string' && typeof e.port === 'number') return `${e.address}:${e.port}`;
  if (err instanceof AggregateError) {
    for (const inner of err.errors) {
      const found = socketAddress(inner, depth + 1);
      if (found !== null) return found;
    }
  }
  return socketAddress(e.cause, depth + 1);
}

/**
 * The driver's or the server's own words for a failure, first line only, without a
 * "<operation> failed: " prefix (several refusals of one connect attempt are joined): what the
 * outage warning and the CLI say.
 */
export function failureReason(err: unknown): string {
  const cause = (err as { cause?: unknown } | null)?.cause;
  const source = cause instanceof Error ? cause : err;
  if (source instanceof AggregateError && source.message === '') {
    return [...new Set(source.errors.map((e: unknown) => (e instanceof Error ? e.message : String(e))))].join(
      '; ',
    );
  }
  const message = source instanceof Error ? source.message : String(source);
  return message.replace(/^[\w ]+ failed: /, '').split('\n', 1)[0] ?? message;
}
