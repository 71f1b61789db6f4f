import type { IncomingMessage, ServerResponse } from 'node:http';
import type { LeaseholdContext } from '../context/context.js';
import type { AnyTask } from '../runtime/task.js';
import { ValidationError } from '../shared/errors.js';
import { dashboardApi } from './api.js';
import type { DashboardRole } from './handler-options.js';
import { appendCookie, readJson, sendError, sendHtml, sendJson } from './http.js';
import { dashboardPage } from './page.js';
import { getRoute, postRoute, type RouteContext } from './routes.js';
import {
  CSRF_COOKIE,
  csrfCookieOf,
  hostAllowed,
  isSameOriginAction,
  originAllowed,
  randomToken,
} from './security.js';
import { loadAssets } from './static.js';
import { ThroughputHistory } from './throughput.js';

/** What the two ways of serving the dashboard (its own server, a handler in an app) tell the core. */
export interface DashboardCoreOptions {
  /** Where the dashboard lives: `''` (the root) or `/a/b`, without a trailing slash. */
  basePath: string;
  /** The role of a request, or null once the gate has answered it itself (401, a redirect). */
  gate(req: IncomingMessage, res: ServerResponse, url: URL): Promise<DashboardRole | null>;
  /** The `Host` names answered to; null: any, and an `Origin` must then name the request's own `Host`. */
  hosts(): ReadonlySet<string> | null;
  /**
   * Where the page's CSRF token lives: one per process (a server of its own), or a cookie the page
   * echoes in a header (an app that may run several processes behind one name).
   */
  csrf: 'process' | 'cookie';
  readOnly: boolean;
  tasks: readonly AnyTask[];
  /** Recorded as who replayed, cancelled, paused: fixed, or the application's name for the request. */
  actor: string | ((req: IncomingMessage) => string);
  /** Rollup interval in ms; 0 for none. */
  rollupIntervalMs: number;
}

/** A dashboard's request handling and its rollup pass. */
export interface DashboardCore {
  /** Serves a request under the base path; any other goes to `next` (or gets 404 without one). */
  handle(req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void): Promise<void>;
  /** Starts the metrics rollup (its first pass at once). */
  start(): void;
  /** Stops the rollup. */
  close(): Promise<void>;
}

// The page's paths, under the base path; the script picks the view from the path.
const PAGES = /^\/(?:|dead|search|enqueue|jobs\/\d{1,19}|queues\/[A-Za-z0-9_.:-]{1,128})$/;

// Scripts and styles only from this dashboard's assets/: the page has no inline script.
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** The path below `basePath`, or null when `pathname` is not under it. */
export function pathWithin(pathname: string, basePath: string): string | null {
  if (basePath === '') return pathname;
  if (pathname === basePath) return '/';
  return pathname.startsWith(`${basePath}/`) ? pathname.slice(basePath.length) : null;
}

/** Builds the dashboard over `context`: pages, assets and the JSON API under `options.basePath`. */
export function dashboardCore(context: LeaseholdContext, options: DashboardCoreOptions): DashboardCore {
  const api = dashboardApi(context);
  const tasks = new Map<string, AnyTask>();
  for (const task of options.tasks) {
    if (typeof task?.name !== 'string')
      throw new ValidationError('tasks', 'must list tasks made by defineTask');
    tasks.set(task.name, task);
  }
  const rollupMs = options.rollupIntervalMs;
  if (!Number.isInteger(rollupMs) || rollupMs < 0) {
    throw new ValidationError('rollupIntervalMs', 'must be a whole number of ms, 0 to turn the rollup off');
  }
  const routes: RouteContext = { api, actor: 'dashboard', tasks, throughput: new ThroughputHistory() };
  const assets = loadAssets();
  const processCsrf = randomToken();
  const { basePath } = options;
  // Rollup failures are not the page's: the charts show what was written.
  const rollup = rollupMs > 0 ? api.rollupService(rollupMs, () => {}) : null;
  let firstPass: Promise<unknown> | undefined;

  async function handle(req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) {
    // Mounted under a prefix, Express and middie strip it from req.url and keep the whole path in
    // originalUrl; the dashboard always matches the whole path against its base path.
    const raw = (req as { originalUrl?: string }).originalUrl ?? req.url ?? '/';
    const url = new URL(raw, 'http://dashboard.invalid');
    const path = pathWithin(url.pathname, basePath);
    if (path === null) {
      if (next) return next();
      return sendJson(res, 404, { error: 'not found' });
    }
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Referrer-Policy', 'no-referrer');
    // Before anything else: a name this dashboard was not set up for is a rebound name or a mistake.
    const hosts = options.hosts();
    const host = req.headers.host?.toLowerCase();
    if (hosts ? !hostAllowed(req, hosts) : host === undefined) {
      return sendJson(res, 421, { error: 'unknown Host' });
    }
    if (!originAllowed(req, hosts ?? new Set([host as string]))) {
      return sendJson(res, 403, { error: 'cross-site request refused' });
    }
    const granted = await options.gate(req, res, url);
    if (granted === null) return;
    const role: DashboardRole = options.readOnly ? 'viewer' : granted;
    if (req.method === 'GET' || req.method === 'HEAD') {
      if (PAGES.test(path)) {
        res.setHeader('Content-Security-Policy', CSP);
        return sendHtml(res, dashboardPage({ csrfToken: pageCsrf(req, res), role, basePath }));
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
      if (!csrfPresented(req)) {
        return sendJson(res, 403, { error: 'cross-site request refused' });
      }
      // A viewer sees everything and changes nothing: refused before the body is read.
      if (role === 'viewer') return sendJson(res, 403, { error: 'read-only access: this role may not act' });
      const answer = await postRoute({ ...routes, actor: actorOf(req) }, path, await readJson(req));
      if (answer) return sendJson(res, answer[0], answer[1]);
      return sendJson(res, 404, { error: 'not found' });
    }
    res.setHeader('Allow', 'GET, POST');
    return sendJson(res, 405, { error: 'method not allowed' });
  }

  // The token a page carries: the process's, or the request's cookie (kept) or a fresh one (set).
  function pageCsrf(req: IncomingMessage, res: ServerResponse): string {
    if (options.csrf === 'process') return processCsrf;
    const token = csrfCookieOf(req) ?? randomToken();
    appendCookie(res, `${CSRF_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=${basePath || '/'}`);
    return token;
  }

  // The header must carry the token the page was given: the process's, or the cookie's (none, none).
  function csrfPresented(req: IncomingMessage): boolean {
    const expected = options.csrf === 'process' ? processCsrf : csrfCookieOf(req);
    return expected !== null && isSameOriginAction(req, expected);
  }

  function actorOf(req: IncomingMessage): string {
    const actor = typeof options.actor === 'function' ? options.actor(req) : options.actor;
    if (typeof actor !== 'string' || actor === '' || actor.length > 200) {
      throw new ValidationError('actor', 'must give a name of 1 to 200 characters');
    }
    return actor;
  }

  return {
    handle: (req, res, next) => handle(req, res, next).catch((err: unknown) => sendError(res, err)),
    start() {
      rollup?.start();
      // The first pass at once: the charts then show the last hour's completions and events.
      firstPass = rollup?.runOnce().catch(() => 0);
    },
    async close() {
      await firstPass;
      await rollup?.stop();
    },
  };
}
