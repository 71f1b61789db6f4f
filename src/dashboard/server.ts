import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Leasehold } from '../client.js';
import { contextOf, type LeaseholdContext } from '../context.js';
import { isLeaseholdError, ValidationError } from '../errors.js';
import type { AnyTask } from '../runtime/task.js';
import { rejectUnknownOptions } from '../unknown-options.js';
import { dashboardApi } from './api.js';
import { dashboardPage } from './page.js';
import { getRoute, postRoute, type RouteContext } from './routes.js';
import {
  allowedHosts,
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
import { loadAssets } from './static.js';
import { ThroughputHistory } from './throughput.js';

/** The API's answer to a `?token=` (401): where the token goes instead. */
export const API_TOKEN_IN_URL =
  '?token= is not accepted on /api/ (a URL ends up in proxy and server logs): send the token in the ' +
  'Authorization header (Authorization: Bearer <token>)';

/** Options of `startDashboard`. */
export interface DashboardOptions {
  /** Port to listen on (default 8080; 0 picks a free one). */
  port?: number;
  /** Address to bind (default 127.0.0.1). Anything but loopback requires `token`. */
  host?: string;
  /** Access token required on every request (as `?token=` once, then a cookie, or `Authorization: Bearer`). */
  token?: string;
  /**
   * A second token for read-only access: its holder sees every page, and every state-changing
   * request is refused (403). Requires `token` (the operator's).
   */
  viewerToken?: string;
  /** Typed tasks: enqueue from the dashboard validates a task's payload with its schema. */
  tasks?: readonly AnyTask[];
  /**
   * How often the metrics rollup pass runs while the dashboard runs, in ms (default 15 s); 0 turns
   * it off (the charts then show what another process rolled up).
   */
  rollupIntervalMs?: number;
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

/** Largest request body accepted, in bytes: a reason, a filter, or a payload enqueued from the form. */
const MAX_BODY = 65_536;

// The page's paths; the script picks the view from the path.
const PAGES = /^\/(?:|dead|search|enqueue|jobs\/\d{1,19})$/;

/**
 * Serves the web dashboard over `lh`'s public API: queues at a glance with health charts (a
 * per-minute rollup it maintains while running), search over every job, bulk replay, cancel and
 * remove by filter, a job's timeline, pause and resume, enqueue (validated by a task's schema).
 * Binds to loopback unless given a token; a viewer token gives read-only access. Takes a client,
 * or the resolved context of one (the dashboard needs nothing else). See docs/dashboard.md.
 */
export async function startDashboard(
  source: Leasehold | LeaseholdContext,
  options: DashboardOptions = {},
): Promise<Dashboard> {
  rejectUnknownOptions(
    options,
    [
      'port',
      'host',
      'token',
      'viewerToken',
      'tasks',
      'rollupIntervalMs',
      'actor',
      'allowedHosts',
      'trustProxy',
      'tls',
    ],
    'options',
  );
  const lh = dashboardApi(contextOf(source));
  const host = options.host ?? '127.0.0.1';
  const token = options.token;
  if (!isLoopback(host) && !token) {
    throw new ValidationError('token', `a dashboard bound to ${host} must require a token (--token)`);
  }
  const viewerToken = options.viewerToken;
  if (viewerToken !== undefined && (!token || typeof viewerToken !== 'string' || viewerToken === token)) {
    throw new ValidationError('viewerToken', 'needs an operator token beside it, and must differ from it');
  }
  const csrf = randomToken();
  const actor = options.actor ?? 'dashboard';
  const tasks = new Map<string, AnyTask>();
  for (const task of options.tasks ?? []) {
    if (typeof task?.name !== 'string')
      throw new ValidationError('tasks', 'must list tasks made by defineTask');
    tasks.set(task.name, task);
  }
  const routes: RouteContext = { api: lh, actor, tasks, throughput: new ThroughputHistory() };
  const assets = loadAssets();
  const rollupMs = options.rollupIntervalMs ?? 15_000;
  if (!Number.isInteger(rollupMs) || rollupMs < 0) {
    throw new ValidationError('rollupIntervalMs', 'must be a whole number of ms, 0 to turn the rollup off');
  }
  // Rollup failures are not the page's: the charts show what was written.
  const rollup = rollupMs > 0 ? lh.rollupService(rollupMs, () => {}) : null;
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
    let role: 'operator' | 'viewer' = 'operator';
    if (token) {
      // The API never takes the token from the URL, right or wrong: a URL ends up in proxy and
      // server logs. A page's ?token= is exchanged for a cookie below; a script sends the header.
      if (url.pathname.startsWith('/api/') && url.searchParams.has('token')) {
        return sendJson(res, 401, { error: API_TOKEN_IN_URL });
      }
      const given = presentedToken(req, url);
      const viewer = viewerToken !== undefined && sameSecret(given, viewerToken);
      if (!sameSecret(given, token) && !viewer) {
        return sendJson(res, 401, { error: 'a valid token is required' });
      }
      if (viewer) role = 'viewer';
      // Keep the token in a cookie so links and the page's own requests carry it.
      const secure = servedOverTls(req, trustProxy) ? '; Secure' : '';
      res.setHeader(
        'Set-Cookie',
        `${TOKEN_COOKIE}=${encodeURIComponent(viewer ? (viewerToken as string) : token)}; HttpOnly; SameSite=Strict; Path=/${secure}`,
      );
      if (req.method === 'GET' && url.searchParams.has('token')) {
        // The token now rides in the cookie: send the browser to the same page without it, so it
        // stays out of the history, the address bar and any screenshot.
        url.searchParams.delete('token');
        res.writeHead(303, { Location: `${url.pathname}${url.search}` });
        res.end();
        return;
      }
    }
    const path = url.pathname;
    if (req.method === 'GET') {
      if (PAGES.test(path)) {
        // Scripts and styles only from this server's /assets/: the page has no inline script.
        res.setHeader(
          'Content-Security-Policy',
          "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        );
        return sendHtml(res, dashboardPage({ csrfToken: csrf, role }));
      }
      const asset = path.startsWith('/assets/') ? assets.get(path.slice('/assets/'.length)) : undefined;
      if (asset) {
        res.writeHead(200, { 'Content-Type': asset.type, 'Content-Length': asset.body.length });
        res.end(asset.body);
        return;
      }
      const answer = await getRoute(routes, path, url.searchParams);
      if (answer) return sendJson(res, answer[0], answer[1]);
      return sendJson(res, 404, { error: 'not found' });
    }
    if (req.method === 'POST') {
      if (!path.startsWith('/api/')) return sendJson(res, 404, { error: 'not found' });
      if (!isSameOriginAction(req, csrf)) return sendJson(res, 403, { error: 'cross-site request refused' });
      // A viewer sees everything and changes nothing: refused before the body is read.
      if (role === 'viewer') return sendJson(res, 403, { error: 'read-only access: this token may not act' });
      const answer = await postRoute(routes, path, await readJson(req));
      if (answer) return sendJson(res, answer[0], answer[1]);
      return sendJson(res, 404, { error: 'not found' });
    }
    res.setHeader('Allow', 'GET, POST');
    return sendJson(res, 405, { error: 'method not allowed' });
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
  rollup?.start();
  // The first pass at once: the charts then show the last hour's completions and events.
  const firstPass = rollup?.runOnce().catch(() => 0);
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `${options.tls ? 'https' : 'http'}://${shownHost}:${address.port}`,
    close: async () => {
      await firstPass;
      await rollup?.stop();
      await closeServer(server);
    },
  };
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
