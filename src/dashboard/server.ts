import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { contextOf, type Leasehold } from '../client.js';
import type { LeaseholdContext } from '../context/context.js';
import type { AnyTask } from '../runtime/task.js';
import { ValidationError } from '../shared/errors.js';
import { rejectUnknownOptions } from '../shared/unknown-options.js';
import { dashboardCore } from './core.js';
import type { DashboardRole } from './handler-options.js';
import { sendJson } from './http.js';
import {
  allowedHosts,
  isLoopback,
  presentedToken,
  sameSecret,
  servedOverTls,
  TOKEN_COOKIE,
} from './security.js';

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

/**
 * Serves the web dashboard over `lh`'s public API on a server of its own: the request handler
 * `dashboardHandler` mounts in apps, at the root, with the token deciding the role (the operator's
 * token acts, the viewer token reads; no token on loopback acts).
 * Queues at a glance with health charts (a per-minute rollup it maintains while running), search
 * over every job, bulk replay, cancel and remove by filter, a job's timeline, pause and resume,
 * enqueue (validated by a task's schema). Binds to loopback unless given a token. Takes a client,
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
  const host = options.host ?? '127.0.0.1';
  const token = options.token;
  if (!isLoopback(host) && !token) {
    throw new ValidationError('token', `a dashboard bound to ${host} must require a token (--token)`);
  }
  const viewerToken = options.viewerToken;
  if (viewerToken !== undefined && (!token || typeof viewerToken !== 'string' || viewerToken === token)) {
    throw new ValidationError('viewerToken', 'needs an operator token beside it, and must differ from it');
  }
  const trustProxy = options.trustProxy === true;
  // Filled in once listening (the port may be picked by the system); no request arrives before.
  let hosts: ReadonlySet<string> = new Set();

  // The token as the dashboard's authorize: no token (loopback), everyone is an admin.
  async function gate(req: IncomingMessage, res: ServerResponse, url: URL): Promise<DashboardRole | null> {
    if (!token) return 'admin';
    // The API never takes the token from the URL, right or wrong: a URL ends up in proxy and
    // server logs. A page's ?token= is exchanged for a cookie below; a script sends the header.
    if (url.pathname.startsWith('/api/') && url.searchParams.has('token')) {
      sendJson(res, 401, { error: API_TOKEN_IN_URL });
      return null;
    }
    const given = presentedToken(req, url);
    const viewer = viewerToken !== undefined && sameSecret(given, viewerToken);
    if (!sameSecret(given, token) && !viewer) {
      sendJson(res, 401, { error: 'a valid token is required' });
      return null;
    }
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
      return null;
    }
    return viewer ? 'viewer' : 'admin';
  }

  const core = dashboardCore(contextOf(source), {
    basePath: '',
    gate,
    hosts: () => hosts,
    csrf: 'process',
    readOnly: false,
    tasks: options.tasks ?? [],
    actor: options.actor ?? 'dashboard',
    rollupIntervalMs: options.rollupIntervalMs ?? 15_000,
  });
  const listener = (req: IncomingMessage, res: ServerResponse) => void core.handle(req, res);
  const server = options.tls ? createTlsServer(options.tls, listener) : createServer(listener);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8080, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  hosts = allowedHosts(host, address.port, options.allowedHosts ?? []);
  core.start();
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `${options.tls ? 'https' : 'http'}://${shownHost}:${address.port}`,
    close: async () => {
      await core.close();
      await closeServer(server);
    },
  };
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
