import { createServer, type Socket, connect as tcpConnect } from 'node:net';
import { afterAll } from 'vitest';

/** An in-process TCP proxy in front of one PostgreSQL server, which a test can black-hole. */
export interface TcpProxy {
  /** `serverUrl` with its host and port replaced by the proxy's. */
  connectionString: string;
  /** Stops forwarding in both directions and drops what arrives, keeping every connection open. */
  blackHole(): void;
  /** Forwards again; connections that lost bytes in the hole are reset (as a partition's would be). */
  heal(): void;
  /** Ends every connection and refuses new ones until `heal()`: the server is down. */
  drop(): void;
  /**
   * Resets every open connection, as a firewall or NAT expiring its state in a partition would,
   * and keeps accepting new ones (into the hole, while it lasts).
   */
  resetConnections(): void;
  /** Connections refused while dropped, so far. */
  readonly refused: number;
  /** Connections accepted (and forwarded, or held in the hole), so far. */
  readonly accepted: number;
  /** Closes the proxy and every connection through it. */
  close(): Promise<void>;
}

const proxies: TcpProxy[] = [];

afterAll(async () => {
  for (const proxy of proxies.splice(0)) await proxy.close();
});

/**
 * Starts a proxy on a free loopback port. A black hole is what a network partition looks like to
 * a client: the TCP connection stays up, writes succeed, and no answer ever arrives.
 */
export async function startTcpProxy(serverUrl: string): Promise<TcpProxy> {
  const target = new URL(serverUrl);
  let holed = false;
  let dropped = false;
  let refused = 0;
  let accepted = 0;
  const pairs = new Set<{ client: Socket; upstream: Socket; lostBytes: boolean }>();
  const server = createServer((client) => {
    if (dropped) {
      refused++;
      client.destroy();
      return;
    }
    accepted++;
    const upstream = tcpConnect(Number(target.port || 5432), target.hostname);
    const pair = { client, upstream, lostBytes: false };
    pairs.add(pair);
    const forward = (from: Socket, to: Socket) =>
      from.on('data', (chunk) => {
        if (holed) pair.lostBytes = true;
        else to.write(chunk);
      });
    forward(client, upstream);
    forward(upstream, client);
    const close = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    // A partition carries no FIN either: the server closing its end (its idle-in-transaction
    // timeout, a terminated backend) is not seen by the client until the heal resets the pair.
    const upstreamClosed = () => {
      if (!holed) return close();
      pair.lostBytes = true;
      upstream.destroy();
    };
    client.on('error', close);
    client.on('close', close);
    upstream.on('error', upstreamClosed);
    upstream.on('close', upstreamClosed);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const url = new URL(serverUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  let closed = false;
  const proxy: TcpProxy = {
    connectionString: url.toString(),
    blackHole() {
      holed = true;
    },
    get refused() {
      return refused;
    },
    get accepted() {
      return accepted;
    },
    drop() {
      dropped = true;
      for (const pair of [...pairs]) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
    },
    resetConnections() {
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        pair.client.resetAndDestroy();
        pair.upstream.destroy();
      }
    },
    heal() {
      holed = false;
      dropped = false;
      for (const pair of [...pairs]) {
        if (!pair.lostBytes) continue;
        pair.client.destroy();
        pair.upstream.destroy();
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      holed = false;
      for (const pair of [...pairs]) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  proxies.push(proxy);
  return proxy;
}
