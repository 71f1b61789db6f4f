import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

/** Name of the header a state-changing request must carry the page's CSRF token in. */
export const CSRF_HEADER = 'x-leasehold-csrf';
/** Cookie that carries the access token after the first `?token=` visit. */
export const TOKEN_COOKIE = 'leasehold_dashboard_token';

/** Cookie that carries a mounted dashboard's CSRF token (the page echoes it in `CSRF_HEADER`). */
export const CSRF_COOKIE = 'leasehold_csrf';

/** Host names that only this machine can reach: the dashboard may run on them without a token. */
export function isLoopback(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === 'localhost' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** A fresh random token (per process: a page from an earlier run cannot act on this one). */
export function randomToken(): string {
  return randomBytes(24).toString('base64url');
}

/** Compares secrets in constant time, so response timing reveals nothing of the expected one. */
export function sameSecret(given: string | undefined | null, expected: string): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The access token a request presents: `Authorization: Bearer`, the cookie, or a page's `?token=` (the API refuses one). */
export function presentedToken(req: IncomingMessage, url: URL): string | null {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice(7);
  const cookie = cookieOf(req, TOKEN_COOKIE);
  if (cookie !== undefined) return decodedCookie(cookie);
  return url.searchParams.get('token');
}

/** The CSRF cookie's token when it has the shape `randomToken` makes, else null. */
export function csrfCookieOf(req: IncomingMessage): string | null {
  const value = cookieOf(req, CSRF_COOKIE);
  return value !== undefined && /^[A-Za-z0-9_-]{32}$/.test(value) ? value : null;
}

// The raw value of the first cookie called `name`, undefined without one.
function cookieOf(req: IncomingMessage, name: string): string | undefined {
  return req.headers.cookie
    ?.split(';')
    .map((part) => part.trim())
    .find((part) => part.startsWith(`${name}=`))
    ?.slice(name.length + 1);
}

// A malformed percent-escape (`%E0%A4%A`) makes decodeURIComponent throw: such a cookie is no token.
function decodedCookie(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

/**
 * The `Host` names (with port) a server bound to `bindHost` answers to: the loopback names, the bound
 * address itself (or, bound to every interface, each local interface address), and `extra` names the
 * operator gave. A page on another site whose name was rebound to this address sends its own name,
 * so it is refused (DNS rebinding).
 */
export function allowedHosts(bindHost: string, port: number, extra: readonly string[] = []): Set<string> {
  const names = new Set<string>(['127.0.0.1', 'localhost', '[::1]']);
  const wildcard = bindHost === '0.0.0.0' || bindHost === '::' || bindHost === '';
  const addresses = wildcard
    ? [bindHost, ...Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address))]
    : [bindHost];
  for (const address of addresses) names.add(bracketed(address));
  for (const name of extra) names.add(bracketed(name));
  const withPort = new Set<string>();
  for (const name of names) {
    const lower = name.toLowerCase();
    // A name given with its port (`queue.example.com:443`, as a proxy in front would send) is kept as is.
    withPort.add(/:\d+$/.test(lower) && !lower.endsWith(']') ? lower : `${lower}:${port}`);
  }
  return withPort;
}

function bracketed(address: string): string {
  return isIP(address) === 6 ? `[${address}]` : address;
}

/** True when the request's `Host` header is one of `allowed` (a missing `Host` is refused). */
export function hostAllowed(req: IncomingMessage, allowed: ReadonlySet<string>): boolean {
  const host = req.headers.host;
  return host !== undefined && allowed.has(host.toLowerCase());
}

/** True unless the request carries an `Origin` that is not `http(s)://` one of `allowed` (`null` included). */
export function originAllowed(req: IncomingMessage, allowed: ReadonlySet<string>): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  const match = /^https?:\/\/([^/]+)$/i.exec(origin);
  return match !== null && allowed.has((match[1] as string).toLowerCase());
}

/**
 * Whether the connection reached us over TLS: the socket itself, or, only when the operator says a
 * proxy in front is trusted, that proxy's `X-Forwarded-Proto: https` (anyone can send the header).
 */
export function servedOverTls(req: IncomingMessage, trustProxy: boolean): boolean {
  if ((req.socket as { encrypted?: boolean }).encrypted === true) return true;
  if (!trustProxy) return false;
  const proto = req.headers['x-forwarded-proto'];
  const first = (Array.isArray(proto) ? proto[0] : proto)?.split(',')[0]?.trim().toLowerCase();
  return first === 'https';
}

/** Cuts `text` to at most `max` UTF-16 code units without splitting a surrogate pair. */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}

/**
 * A state-changing request is accepted only from the dashboard's own page: it must carry the
 * per-process CSRF token in a header (another site's form cannot set headers, and its script cannot
 * read the page to learn the token). The `Host` and `Origin` were already checked against the names
 * the server was started for (`hostAllowed`, `originAllowed`), not against each other: a rebound
 * name makes both the attacker's.
 */
export function isSameOriginAction(req: IncomingMessage, csrfToken: string): boolean {
  const header = req.headers[CSRF_HEADER];
  return sameSecret(Array.isArray(header) ? header[0] : header, csrfToken);
}
