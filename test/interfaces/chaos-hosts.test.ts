// The many-hosts harness's pure parts (chaos/hosts.mjs): its flags and its delaying relay. The
// network it builds and removes (root, iproute2 and nftables) is tested in the system suite:
// test/system/hosts-network.test.ts.
import { connect, createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';

const options = (await import('../../chaos/records/hosts-options.mjs' as string)) as {
  parseHostsOptions(argv: string[]): Record<string, unknown>;
};
type Rule = { name: string; ok: boolean };
const checks = (await import('../../chaos/checker/hosts-checks.mjs' as string)) as {
  hostInvariants(measures: Record<string, unknown>, o: Record<string, unknown>): Rule[];
};
const relayModule = (await import('../../chaos/faults/relay.mjs' as string)) as {
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

  it('runs every phase unless --phases names some, in their own order, each once', () => {
    expect(options.parseHostsOptions([]).phases).toEqual(['fault-free', 'faulted', 'latency']);
    expect(options.parseHostsOptions(['--phases', 'latency']).phases).toEqual(['latency']);
    expect(options.parseHostsOptions(['--phases', 'latency,fault-free,latency']).phases).toEqual([
      'fault-free',
      'latency',
    ]);
    expect(options.parseHostsOptions(['--phases', 'latency,nope']).error).toMatch(/--phases takes/);
    expect(options.parseHostsOptions(['--phases', ',']).error).toMatch(/--phases takes/);
  });

  it('gives the latency phase long jobs longer than the default lease, and refuses it none', () => {
    expect(options.parseHostsOptions([])).toMatchObject({ longJobs: 12, longJobS: 35 });
    expect(options.parseHostsOptions(['--long-job-s', '30']).error).toMatch(
      /--long-job-s must be an integer from 31/,
    );
    expect(options.parseHostsOptions(['--long-jobs', '0']).error).toMatch(/needs --long-jobs above 0/);
    expect(options.parseHostsOptions(['--long-jobs', '0', '--phases', 'fault-free,faulted']).phases).toEqual([
      'fault-free',
      'faulted',
    ]);
  });

  it('refuses a cut that would not outlast the leases', () => {
    expect(options.parseHostsOptions(['--cut-ms', '3000']).error).toMatch(/--cut-ms must be longer/);
    expect(options.parseHostsOptions(['--cut-ms', '4000']).cutMs).toBe(4000);
  });
});

describe('the latency phase checks', () => {
  // Measures as measureHosts reads them after a latency-only run: 12 long jobs, 3 renewals each.
  const latency = (long: Record<string, number>, renewals: Record<string, number>) => ({
    partitions: [],
    throughput: [],
    latency: {
      host: 2,
      longJobs: 12,
      longJobMs: 35_000,
      expiries: 0,
      refusals: 0,
      lost_answers: 0,
      long: { finished: 12, finished_on_host: 12, first_claim: 12, min_extensions: 3, ...long },
      renewals: { renewals: 36, on_host: 36, ...renewals },
    },
  });
  const judge = (measures: Record<string, unknown>) =>
    checks.hostInvariants(measures, { healthyHosts: [2, 3], minThroughputPct: 80, phases: ['latency'] });

  it('judges only the phases that ran, and holds when every long job renewed across the link', () => {
    const rules = judge(latency({}, {}));
    expect(rules.map((r) => r.name).join('\n')).not.toMatch(/link cuts|healthy host/);
    expect(rules).toHaveLength(3);
    expect(rules.every((r) => r.ok)).toBe(true);
  });

  it('fails when a long job ran elsewhere, was claimed twice, or never renewed', () => {
    const failed = (measures: Record<string, unknown>) => judge(measures).filter((r) => !r.ok);
    expect(failed(latency({ finished_on_host: 11 }, {}))).toHaveLength(1);
    expect(failed(latency({ first_claim: 11 }, {}))).toHaveLength(1);
    expect(failed(latency({ min_extensions: 0 }, {}))).toHaveLength(1);
    expect(failed(latency({}, { renewals: 37 }))).toHaveLength(1);
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
