import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Leasehold } from '../client.js';
import { contextOf, type LeaseholdContext } from '../context.js';
import { isLeaseholdError, ValidationError } from '../errors.js';
import { rejectUnknownOptions } from '../unknown-options.js';
import { dashboardApi } from './api.js';
import { dashboardPage } from './page.js';
import {
  allowedHosts,
  cutText,
  hostAllowed,
  isLoopback,
  isSameOriginAction,
  originAllowed,
  presentedToken,
  randomToken,
  sameSecret,
  servedOverTls,
  TOKEN_COOKIE,
} from './security.js';
import { ThroughputHistory } from './throughput.js';

/** Options of `startDashboard`. */
export interface DashboardOptions {
  /** Port to listen on (default 8080; 0 picks a free one). */
  port?: number;
  /** Address to bind (default 127.0.0.1). Anything but loopback requires `token`. */
  host?: string;
  /** Access token required on every request (as `?token=` once, then a cookie, or `Authorization: Bearer`). */
  token?: string;
  /** Recorded as the actor of replays and cancels (default `dashboard`). */
  actor?: string;
  /**
   * More `Host` names the dashboard answers to (e.g. `queue.example.com`, or `queue.example.com:443`
   * behind a proxy), besides the loopback names and the bound address. Any other `Host` gets 421 and
   * any other `Origin` 403, so a name rebound to this address (DNS rebinding) reaches nothing.
   */
  allowedHosts?: readonly string[];
  /** Trust `X-Forwarded-Proto` from a proxy in front (only then does it mark the cookie `Secure`). */
  trustProxy?: boolean;
  /** Serve HTTPS with this key and certificate (PEM); the token cookie is then `Secure`. */
  tls?: { key: string | Buffer; cert: string | Buffer };
}

/** A running dashboard. */
export interface Dashboard {
  /** The address it serves, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  /** Stops serving (the client is the caller's to close). */
  close(): Promise<void>;
}

/** Longest payload excerpt shown on a job page, in characters. */
export const MAX_PAYLOAD_PREVIEW = 2_000;
/** Largest request body accepted, in bytes: actions carry only a reason. */
const MAX_BODY = 8_192;

/**
 * Serves the web dashboard over `lh`'s public API: queues at a glance (polled every 2 s), a job's
 * history, and dead jobs with replay and cancel. Binds to loopback unless given a token. Takes a
 * client, or the resolved context of one (the dashboard needs nothing else).
 */
export async function startDashboard(
  source: Leasehold | LeaseholdContext,
  options: DashboardOptions = {},
): Promise<Dashboard> {
  rejectUnknownOptions(
    options,
    ['port', 'host', 'token', 'actor', 'allowedHosts', 'trustProxy', 'tls'],
    'options',
  );
  const lh = dashboardApi(contextOf(source));
  const host = options.host ?? '127.0.0.1';
  const token = options.token;
  if (!isLoopback(host) && !token) {
    throw new ValidationError('token', `a dashboard bound to ${host} must require a token (--token)`);
  }
  const csrf = randomToken();
  const actor = options.actor ?? 'dashboard';
  const throughput = new ThroughputHistory();
  const trustProxy = options.trustProxy === true;
  // Filled in once listening (the port may be picked by the system); no request arrives before.
  let hosts: ReadonlySet<string> = new Set();
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((err: unknown) => sendError(res, err));
  };
  const server = options.tls ? createTlsServer(options.tls, listener) : createServer(listener);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Referrer-Policy', 'no-referrer');
    // Before anything else: a name this server was not started for is a rebound name or a mistake.
    if (!hostAllowed(req, hosts)) return sendJson(res, 421, { error: 'unknown Host' });
    if (!originAllowed(req, hosts)) return sendJson(res, 403, { error: 'cross-site request refused' });
    if (token) {
      const given = presentedToken(req, url);
      if (!sameSecret(given, token)) return sendJson(res, 401, { error: 'a valid token is required' });
      // Keep the token in a cookie so links and the page's own requests carry it.
      const secure = servedOverTls(req, trustProxy) ? '; Secure' : '';
      res.setHeader(
        'Set-Cookie',
        `${TOKEN_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/${secure}`,
      );
      if (req.method === 'GET' && url.searchParams.has('token') && !url.pathname.startsWith('/api/')) {
        // The token now rides in the cookie: send the browser to the same page without it, so it
        // stays out of the history, the address bar and any screenshot. (A script calling the API
        // with ?token= keeps its answer: it has no cookie jar to follow a redirect with.)
        url.searchParams.delete('token');
        res.writeHead(303, { Location: `${url.pathname}${url.search}` });
        res.end();
        return;
      }
    }
    const path = url.pathname;
    if (req.method === 'GET') {
      if (path === '/' || path === '/dead' || /^\/jobs\/\d{1,19}$/.test(path)) {
        // Only the page's own inline script runs; every value it shows is set as text, never as HTML.
        const nonce = randomToken();
        res.setHeader(
          'Content-Security-Policy',
          `default-src 'self'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'`,
        );
        return sendHtml(res, dashboardPage({ csrfToken: csrf, nonce }));
      }
      if (path === '/api/overview') return sendJson(res, 200, await overview());
      if (path === '/api/dead') return sendJson(res, 200, await deadJobs(url.searchParams));
      const job = /^\/api\/jobs\/(\d{1,19})$/.exec(path);
      if (job)
        return sendJson(res, 200, await jobPage(job[1] as string, url.searchParams.get('payload') === '1'));
      return sendJson(res, 404, { error: 'not found' });
    }
    if (req.method === 'POST') {
      const action = /^\/api\/jobs\/(\d{1,19})\/(replay|cancel)$/.exec(path);
      if (!action) return sendJson(res, 404, { error: 'not found' });
      if (!isSameOriginAction(req, csrf)) return sendJson(res, 403, { error: 'cross-site request refused' });
      const body = await readJson(req);
      const reason =
        typeof body.reason === 'string' && body.reason.trim()
          ? cutText(body.reason.trim(), 1000)
          : 'from the dashboard';
      const id = action[1] as string;
      if (action[2] === 'replay') {
        const result = await lh.replay([id], { reason, actor });
        return sendJson(res, 200, { replayed: result.replayed });
      }
      const result = await lh.cancel(id, { reason, actor });
      return sendJson(res, 200, result);
    }
    res.setHeader('Allow', 'GET, POST');
    return sendJson(res, 405, { error: 'method not allowed' });
  }

  async function overview() {
    const [stats, blockedKeys] = await Promise.all([
      lh.stats({ windowMs: 60_000 }),
      lh.blockedKeys({ limit: 50 }),
    ]);
    throughput.record(
      stats.at.getTime(),
      Object.fromEntries(stats.queues.map((q) => [q.queue, q.completedInWindow])),
    );
    return {
      at: stats.at,
      queues: stats.queues,
      throughput: throughput.samples(),
      windowTruncated: stats.windowTruncated,
      // Ordering keys held up by a dead head: replay or skip the head to unblock them.
      blockedKeys,
    };
  }

  async function deadJobs(params: URLSearchParams) {
    const queue = params.get('queue') || undefined;
    const errorCode = params.get('errorCode') || undefined;
    const cursor = params.get('cursor') || undefined;
    return lh.listDead({ queue, errorCode, cursor, limit: 50 });
  }

  // The payload only when asked for (`?payload=1`), as the CLI's `jobs show --payload`.
  async function jobPage(id: string, withPayload: boolean) {
    const job = await lh.getJob(id, { history: true });
    if (!job) return { job: null };
    const { payload, ...rest } = job;
    const flow = await lh.getFlow(id);
    return { job: { ...rest, payloadPreview: withPayload ? preview(payload) : null }, flow };
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8080, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  hosts = allowedHosts(host, address.port, options.allowedHosts ?? []);
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `${options.tls ? 'https' : 'http'}://${shownHost}:${address.port}`,
    close: () => closeServer(server),
  };
}

/** A payload as shown on a job page: JSON, cut at `MAX_PAYLOAD_PREVIEW` characters. */
export function preview(payload: unknown): { text: string; truncated: boolean } {
  let text: string;
  try {
    text = JSON.stringify(payload, null, 2) ?? 'null';
  } catch {
    text = '(not serialisable)';
  }
  return text.length > MAX_PAYLOAD_PREVIEW
    ? { text: text.slice(0, MAX_PAYLOAD_PREVIEW), truncated: true }
    : { text, truncated: false };
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
    throw new ValidationError('body', 'expected application/json');
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new ValidationError('body', `larger than ${MAX_BODY} bytes`);
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return {};
  const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8' });
  res.end(JSON.stringify(value));
}

function sendHtml(res: ServerResponse, html: string): void {
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
  res.end(html);
}

function sendError(res: ServerResponse, err: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // Leasehold errors are written for operators; anything else (a driver error) is not shown.
  if (isLeaseholdError(err)) {
    const status =
      err.code === 'JOB_NOT_FOUND'
        ? 404
        : err.code === 'VALIDATION'
          ? 400
          : err.code === 'JOB_STATE'
            ? 409
            : 500;
    sendJson(res, status, { error: err.message, code: err.code });
    return;
  }
  if (err instanceof SyntaxError) {
    sendJson(res, 400, { error: 'malformed JSON' });
    return;
  }
  sendJson(res, 500, { error: 'internal error' });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
