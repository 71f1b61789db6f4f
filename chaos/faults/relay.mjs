// A TCP relay that adds delay and jitter, for the many-hosts harness (chaos/hosts.mjs). It runs
// inside a worker host's network namespace, listens on that namespace's 127.0.0.1 and forwards
// each connection to PostgreSQL across the host's veth link.
//
// Why a relay and not `tc qdisc ... netem`: the kernel this harness was built on has no netem
// qdisc ("Specified qdisc kind is unknown"). What differs from netem: the delay applies to each
// chunk that one read() returned, not to each packet; chunks of one direction are released in the
// order they arrived (a chunk never overtakes the one before it, so jitter cannot reorder, and a
// chunk whose draw is shorter than its predecessor's remaining wait leaves with it). Packet loss is
// not the relay's business: nftables drops real packets on the veth, and TCP retransmits them.
//
// As a process (`node chaos/faults/relay.mjs`, forked with an IPC channel): parent -> {type:'start',
// listenPort, targetHost, targetPort, rttMs, jitterMs, seed} | {type:'set', rttMs, jitterMs};
// child -> {type:'ready', port} | {type:'set'}.
import { connect, createServer } from 'node:net';
import { pathToFileURL } from 'node:url';
import { seededRandom } from '../records/rng.mjs';

// A direction holding more than this many bytes not yet released stops reading its source.
const HIGH_WATER_BYTES = 1 << 20;

/**
 * Starts a relay. `rttMs` is the round-trip time added: half of it delays each direction.
 * `jitterMs` spreads each chunk's one-way delay uniformly over ±jitterMs (never below zero).
 * Resolves with { port, set({ rttMs, jitterMs }), close() }.
 */
export function startRelay({
  listenHost = '127.0.0.1',
  listenPort = 0,
  targetHost,
  targetPort,
  rttMs = 0,
  jitterMs = 0,
  seed = 1,
}) {
  const link = { rttMs, jitterMs, rng: seededRandom(seed) };
  const sockets = new Set();
  const server = createServer((client) => {
    const upstream = connect({ host: targetHost, port: targetPort });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('close', () => sockets.delete(socket));
      // Either side failing ends the pair, as a broken connection would.
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    pipeDelayed(client, upstream, link);
    pipeDelayed(upstream, client, link);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenPort, listenHost, () => {
      resolve({
        port: server.address().port,
        set(next) {
          link.rttMs = next.rttMs ?? link.rttMs;
          link.jitterMs = next.jitterMs ?? link.jitterMs;
        },
        close() {
          for (const socket of sockets) socket.destroy();
          return new Promise((done) => server.close(() => done()));
        },
      });
    });
  });
}

/** One chunk's one-way delay under `link`'s settings. */
export function oneWayDelay(link) {
  const base = link.rttMs / 2;
  if (link.jitterMs <= 0) return base;
  return Math.max(0, base + (link.rng() * 2 - 1) * link.jitterMs);
}

// Copies `from` to `to`, each chunk held for its delay, never released before the chunk ahead of it.
function pipeDelayed(from, to, link) {
  const queue = []; // { at, chunk }
  let bytes = 0;
  let lastAt = 0;
  let timer = null;
  let ended = false;
  const release = () => {
    timer = null;
    const now = performance.now();
    while (queue.length > 0 && queue[0].at <= now) {
      const { chunk } = queue.shift();
      bytes -= chunk.length;
      if (!to.destroyed) to.write(chunk);
    }
    if (bytes < HIGH_WATER_BYTES && from.isPaused()) from.resume();
    if (queue.length > 0) schedule();
    else if (ended && !to.destroyed) to.end();
  };
  const schedule = () => {
    if (timer === null && queue.length > 0)
      timer = setTimeout(release, Math.max(0, queue[0].at - performance.now()));
  };
  from.on('data', (chunk) => {
    const delay = oneWayDelay(link);
    if (delay <= 0 && queue.length === 0) {
      if (!to.destroyed) to.write(chunk);
      return;
    }
    lastAt = Math.max(performance.now() + delay, lastAt);
    queue.push({ at: lastAt, chunk });
    bytes += chunk.length;
    if (bytes >= HIGH_WATER_BYTES) from.pause();
    schedule();
  });
  from.on('end', () => {
    ended = true;
    if (queue.length === 0 && !to.destroyed) to.end();
  });
  from.on('close', () => {
    if (timer !== null) clearTimeout(timer);
    // Closed by an error (not a clean end): the pair goes down together.
    if (!ended) to.destroy();
  });
}

// Run as a process: controlled by the harness over IPC; leaves when the harness goes away.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  let relay = null;
  process.on('message', async (message) => {
    try {
      if (message.type === 'start') {
        relay = await startRelay(message);
        process.send({ type: 'ready', port: relay.port });
      } else if (message.type === 'set' && relay) {
        relay.set(message);
        process.send({ type: 'set' });
      }
    } catch (err) {
      process.send?.({ type: 'failed', message: String(err?.stack ?? err) });
      process.exit(1);
    }
  });
  process.on('disconnect', () => process.exit(0));
}
