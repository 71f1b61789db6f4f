import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** Name of the header a state-changing request must carry the page's CSRF token in. */
export const CSRF_HEADER = 'x-leasehold-csrf';
/** Cookie that carries the access token after the first `?token=` visit. */
export const TOKEN_COOKIE = 'leasehold_dashboard_token';

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

/** The access token a request presents: `Authorization: Bearer`, the cookie, or `?token=`. */
export function presentedToken(req: IncomingMessage, url: URL): string | null {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice(7);
  const cookie = req.headers.cookie
    ?.split(';')
    .map((part) => part.trim())
    .find((part) => part.startsWith(`${TOKEN_COOKIE}=`));
  if (cookie) return decodeURIComponent(cookie.slice(TOKEN_COOKIE.length + 1));
  return url.searchParams.get('token');
}

/**
 * A state-changing request is accepted only from the dashboard's own page: it must carry the
 * per-process CSRF token in a header (another site's form cannot set headers, and its script cannot
 * read the page to learn the token), and an `Origin`, when the browser sends one, must be this
 * server's own.
 */
export function isSameOriginAction(req: IncomingMessage, csrfToken: string): boolean {
  const header = req.headers[CSRF_HEADER];
  if (!sameSecret(Array.isArray(header) ? header[0] : header, csrfToken)) return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  const host = req.headers.host;
  return host !== undefined && (origin === `http://${host}` || origin === `https://${host}`);
}
