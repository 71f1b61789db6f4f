import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/embedded.js';

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

/**
 * Starts one embedded PostgreSQL for the whole run unless DATABASE_URL names a server to use.
 * Test files isolate themselves in schemas of their own (see ./db.ts).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env.DATABASE_URL;
  if (external) {
    project.provide('databaseUrl', external);
    return async () => {};
  }
  const server = await startEmbeddedPostgres({ settings: { max_connections: '300' } });
  project.provide('databaseUrl', server.connectionString);
  return () => server.stop();
}
