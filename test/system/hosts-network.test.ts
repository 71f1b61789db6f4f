// The many-hosts harness's network (chaos/netns.mjs): namespaces joined by veth pairs, nft packet
// loss and link cuts, all removed again. Needs root, iproute2 and nftables, which the system
// suite's setup requires (test/system/global-setup.ts); it uses a prefix of its own, so it never
// touches a harness run's network.
import { spawn } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';

process.env.LHH_NETNS_PREFIX = 'lhhtst';
const JANITOR = new URL('../../chaos/harness/hosts-janitor.mjs', import.meta.url).pathname;
const netns = (await import('../../chaos/faults/netns.mjs' as string)) as {
  PREFIX: string;
  createNetwork(hosts: number): void;
  removeNetwork(): string[];
  ourNamespaces(): string[];
  setLink(i: number, up: boolean): void;
  setLoss(i: number, pct: number): void;
  run(file: string, args: string[]): string;
};

describe('the harness network (root, iproute2, nftables)', () => {
  afterAll(() => {
    netns.removeNetwork();
  });

  it('builds namespaces joined by veth pairs, cuts a link, and removes everything it made', () => {
    expect(netns.PREFIX).toBe('lhhtst');
    netns.removeNetwork();
    netns.createNetwork(2);
    expect(netns.ourNamespaces().sort()).toEqual(['lhhtst-db', 'lhhtst-h1', 'lhhtst-h2']);
    const addresses = netns.run('ip', ['-n', 'lhhtst-h2', '-4', 'addr', 'show', 'dev', 'lhhtst-v2']);
    expect(addresses).toContain('10.231.2.2/24');
    netns.setLoss(1, 5);
    expect(
      netns.run('ip', ['netns', 'exec', 'lhhtst-h1', 'nft', 'list', 'table', 'inet', 'lhh_loss']),
    ).toMatch(/numgen random mod 100 < 5/);
    netns.setLink(1, false);
    expect(netns.run('ip', ['-n', 'lhhtst-h1', 'link', 'show', 'lhhtst-v1'])).toMatch(
      /state DOWN|,DOWN|<BROADCAST,MULTICAST>/,
    );
    netns.setLink(1, true);
    expect(netns.removeNetwork().sort()).toEqual(['lhhtst-db', 'lhhtst-h1', 'lhhtst-h2']);
    expect(netns.ourNamespaces()).toEqual([]);
    expect(netns.run('ip', ['netns', 'list'])).not.toMatch(/lhhtst-/);
  });

  // The janitor (chaos/hosts-janitor.mjs) removes the network when the harness that started it
  // dies without saying it cleaned up, and leaves it alone when told `done`.
  function janitor(say: string) {
    const child = spawn(process.execPath, [JANITOR], { stdio: ['pipe', 'ignore', 'inherit'] });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    child.stdin.end(say);
    return exited;
  }

  it('has a janitor that removes the network when the harness dies without cleaning up', async () => {
    netns.removeNetwork();
    netns.createNetwork(1);
    await janitor('done');
    expect(netns.ourNamespaces().sort()).toEqual(['lhhtst-db', 'lhhtst-h1']);
    await janitor('');
    expect(netns.ourNamespaces()).toEqual([]);
  });
});
