import type { IncomingMessage, ServerResponse } from 'node:http';
import type { LeaseholdContext } from '../context/context.js';
import { type DashboardCore, dashboardCore } from './core.js';
import type { DashboardHandlerOptions, DashboardRole } from './handler-options.js';
import { sendJson } from './http.js';

/**
 * The dashboard as a handler inside the user's app (options already checked): the app's login runs
 * before it, `authorize` maps the request to a role, and `false` is answered 403. Loaded on the
 * first call of `dashboardHandler` (src/on-demand.ts).
 */
export function mountedDashboard(context: LeaseholdContext, options: DashboardHandlerOptions): DashboardCore {
  const hosts =
    options.allowedHosts === undefined ? null : new Set(options.allowedHosts.map((h) => h.toLowerCase()));
  const core = dashboardCore(context, {
    basePath: options.basePath,
    gate: async (req: IncomingMessage, res: ServerResponse): Promise<DashboardRole | null> => {
      const role = await options.authorize(req);
      if (role === 'admin' || role === 'viewer') return role;
      // Anything else (false, a typo of a role) is a refusal: the app decided this user may not look.
      sendJson(res, 403, { error: 'not allowed to see the dashboard' });
      return null;
    },
    hosts: () => hosts,
    csrf: 'cookie',
    readOnly: options.readOnly === true,
    tasks: options.tasks ?? [],
    actor: options.actor ?? 'dashboard',
    rollupIntervalMs: options.rollupIntervalMs ?? 15_000,
  });
  core.start();
  return core;
}
