// The many-hosts harness's pure parts (chaos/hosts.mjs): its flags and its delaying relay. The
// network it builds and removes (root, iproute2 and nftables) is tested in the system suite:
// test/system/hosts-network.test.ts.
import { connect, createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';

const options = (await import('../../chaos/hosts-options.mjs' as string)) as {
  parseHostsOptions(argv: string[]): Record<string, unknown>;
};
const relayModule = (await import('../../chaos/relay.mjs' as string)) as {
  startRelay(o: Record<string, unknown>): Promise<{ port: number; close(): Promise<void> }>;
};

describe('chaos:hosts flags', () => {
  it('takes the defaults, and bounds every number', () => {
    const parsed = options.parseHostsOptions([]);
    expect(parsed).toMatchObject({ hosts: 3, jobs: 100_000, leaseMs: 3000, cutMs: 7000, json: null });
    expect(options.parseHostsOptions(['--hosts', '9']).error).toMatch(
      /--hosts must be an integer from 2 to 8/,
    );
    expect(options.parseHostsOptions(['--jobs', '1.5']).error).toMatch(/--jobs/);
    expect(options.parseHostsOptions(['--nope']).error).toMatch(/nope/);
  });

  it('refuses a cut that would not outlast the leases', () => {
    expect(options.parseHostsOptions(['--cut-ms', '3000']).error).toMatch(/--cut-ms must be longer/);
    expect(options.parseHostsOptions(['--cut-ms', '4000']).cutMs).toBe(4000);
  });
});

describe('the delaying relay', () => {
  // An echo server behind a relay adding `rttMs` (half each way) ± jitter.
  async function echoBehindRelay(rttMs: number, jitterMs: number) {
    const echo = createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    const address = echo.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const relay = await relayModule.startRelay({
      targetHost: '127.0.0.1',
      targetPort: address.port,
      rttMs,
      jitterMs,
    });
    const client: Socket = connect({ host: '127.0.0.1', port: relay.port });
    client.setNoDelay(true);
    await new Promise((resolve) => client.once('connect', resolve));
    const close = async () => {
      client.destroy();
      await relay.close();
      await new Promise((resolve) => echo.close(resolve));
    };
    return { client, close };
  }

  it('delays a round trip by about rttMs and never reorders what it carries, whatever the jitter', async () => {
    const { client, close } = await echoBehindRelay(80, 30);
    try {
      let received = '';
      client.on('data', (chunk) => {
        received += chunk.toString();
      });
      const sentAt = performance.now();
      const firstBack = new Promise<number>((resolve) =>
        client.once('data', () => resolve(performance.now())),
      );
      const messages = Array.from({ length: 40 }, (_, i) => `<${i}>`);
      for (const m of messages) {
        client.write(m);
        await new Promise((resolve) => setTimeout(resolve, 3));
      }
      const rtt = (await firstBack) - sentAt;
      // 80 ms less two jitters of 30 ms at most (each direction draws its own).
      expect(rtt).toBeGreaterThanOrEqual(20);
      await expect.poll(() => received.length, { timeout: 5000 }).toBe(messages.join('').length);
      expect(received).toBe(messages.join(''));
    } finally {
      await close();
    }
  });

  it('adds nothing at 0 ms', async () => {
    const { client, close } = await echoBehindRelay(0, 0);
    try {
      const sentAt = performance.now();
      const back = new Promise<number>((resolve) => client.once('data', () => resolve(performance.now())));
      client.write('x');
      expect((await back) - sentAt).toBeLessThan(60);
    } finally {
      await close();
    }
  });

  it('delays by the configured round trip', async () => {
    const { client, close } = await echoBehindRelay(120, 0);
    try {
      const sentAt = performance.now();
      const back = new Promise<number>((resolve) => client.once('data', () => resolve(performance.now())));
      client.write('x');
      expect((await back) - sentAt).toBeGreaterThanOrEqual(118);
    } finally {
      await close();
    }
  });
});
