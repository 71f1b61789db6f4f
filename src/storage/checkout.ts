import type pg from 'pg';

/**
 * Listens for 'error' on a client checked out of a pool, until the returned function is called
 * (just before `release`). pg-pool removes its own listener while a client is checked out, and pg
 * emits 'error' on the client when its connection ends (a terminated backend, a server restart)
 * even after failing the query in flight: unheard, that event is an uncaught exception that ends
 * the process. The failure still reaches the caller through the query that fails.
 */
export function guardCheckedOut(client: pg.PoolClient): () => void {
  const ignore = () => {};
  client.on('error', ignore);
  return () => {
    client.off('error', ignore);
  };
}
