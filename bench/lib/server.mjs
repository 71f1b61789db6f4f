// The PostgreSQL server the bench runs against: DATABASE_URL when set, else a throwaway embedded one.
import { startEmbeddedPostgres } from '../../dist/index.js';

// Two worker processes of each system plus the bench's own pools stay well under this;
// the default of 100 would also do, but leaves little room when DATABASE_URL points elsewhere.
export const EMBEDDED_SETTINGS = { max_connections: '200' };

/**
 * Opens the server; `stop()` is a no-op for an external one. An embedded one runs with `settings`
 * (default EMBEDDED_SETTINGS; the scale, churn and ordering benches keep PostgreSQL's own: `{}`).
 */
export async function openServer({ settings = EMBEDDED_SETTINGS } = {}) {
  const external = process.env.DATABASE_URL;
  if (external) {
    return { connectionString: external, embedded: false, stop: async () => {} };
  }
  const server = await startEmbeddedPostgres({ settings });
  return { connectionString: server.connectionString, embedded: true, stop: () => server.stop() };
}
