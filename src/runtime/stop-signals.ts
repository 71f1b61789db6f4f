/**
 * Stops gracefully on the first SIGTERM or SIGINT; a second signal means "now": the process exits
 * and its leases are left to expire and be recovered. Returns the function that removes the handlers.
 */
export function stopOnSignals(stop: () => Promise<void>): () => void {
  let signalled = false;
  const handler = () => {
    if (signalled) process.exit(130);
    signalled = true;
    void stop();
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  return () => {
    process.off('SIGTERM', handler);
    process.off('SIGINT', handler);
  };
}
