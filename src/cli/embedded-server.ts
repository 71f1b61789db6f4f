import { type EmbeddedPostgres, startEmbeddedPostgres } from '../index.js';
import { note } from './log.js';

// Stopping waits for the server process to exit, which never happens if it already died (a Ctrl-C
// in a terminal reaches it too); a command must still end.
const STOP_TIMEOUT_MS = 15_000;

/** A throwaway PostgreSQL for one command. */
export interface CommandServer {
  /** Its connection string. */
  readonly connectionString: string;
  /** Stops it and removes its data, giving up (with a note) after 15 s. */
  stop(): Promise<void>;
}

/** Starts an embedded PostgreSQL, saying so on stderr. */
export async function startCommandServer(): Promise<CommandServer> {
  note('no --database-url or DATABASE_URL: starting an embedded PostgreSQL (its data is discarded on exit)');
  // startEmbeddedPostgres removes the package's own signal hooks, so the CLI's handlers decide.
  const server: EmbeddedPostgres = await startEmbeddedPostgres();
  note(`embedded PostgreSQL ready on 127.0.0.1:${server.port}`);
  return {
    connectionString: server.connectionString,
    async stop() {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS);
      });
      const result = await Promise.race([server.stop().then(() => 'stopped' as const), timeout]);
      clearTimeout(timer);
      if (result === 'timeout')
        note(`the embedded PostgreSQL did not stop within ${STOP_TIMEOUT_MS / 1000} s`);
    },
  };
}
