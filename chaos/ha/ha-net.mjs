// The high-availability rig's network (chaos/ha.mjs): one namespace per machine of a small data
// centre, all plugged into one switch (a Linux bridge in a namespace of its own). Machines: `ctl`
// (the rig itself, the producer and the ledger's PostgreSQL: outside the cluster), `dcs` (etcd for
// Patroni, the monitor for pg_auto_failover), `pg1`..`pg3` (one PostgreSQL node each, with its
// manager's agent) and `w1`..`w<n>` (worker hosts). Everything carries the prefix `lhha` (namespaces
// `lhha-<machine>`, the switch `lhha-sw`, its ports `lhha-<machine>`, the nft table `lhha_cut`);
// every address is in 10.232.0.0/24, inside those namespaces only. Removal deletes exactly what
// carries the prefix, also what a crashed earlier run left behind.
import { spawnSync } from 'node:child_process';
import { run } from '../faults/netns.mjs';

export const PREFIX = 'lhha';
const SWITCH_NS = `${PREFIX}-sw`;
const BRIDGE = 'br0';
const FIXED = { ctl: 2, dcs: 3, pg1: 11, pg2: 12, pg3: 13 };

/** The address of machine `name` (`ctl`, `dcs`, `pg1`.., `w1`..). */
export function addressOf(name) {
  if (name in FIXED) return `10.232.0.${FIXED[name]}`;
  const worker = /^w([1-8])$/.exec(name);
  if (worker) return `10.232.0.${20 + Number(worker[1])}`;
  throw new Error(`ha-net: no machine ${name}`);
}

/** The namespace of machine `name`. */
export const nsOf = (name) => `${PREFIX}-${name}`;

/** The namespaces that carry our prefix (ours, or a crashed run's). */
export function ourNamespaces() {
  return run('ip', ['netns', 'list'])
    .split('\n')
    .map((line) => line.split(' ')[0])
    .filter((name) => name.startsWith(`${PREFIX}-`));
}

/** Every process id inside namespace `ns`. */
export function namespacePids(ns) {
  const result = spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' });
  if (result.status !== 0) return [];
  return result.stdout
    .split('\n')
    .filter(Boolean)
    .map(Number)
    .filter((pid) => Number.isInteger(pid) && pid > 1 && pid !== process.pid);
}

/** SIGKILLs every process in namespace `ns` (a machine losing power); returns how many. */
export function killNamespace(ns) {
  const pids = namespacePids(ns);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return pids.length;
}

/** Ends every process in our namespaces, then deletes them. Returns the names removed. */
export function removeNetwork() {
  const names = ourNamespaces();
  for (const name of names) killNamespace(name);
  for (const name of names) spawnSync('ip', ['netns', 'delete', name], { stdio: 'ignore' });
  const left = ourNamespaces();
  if (left.length > 0) throw new Error(`ha-net: could not remove ${left.join(', ')}`);
  return names;
}

/** Creates the switch and one namespace per machine in `machines`, each plugged into the switch. */
export function createNetwork(machines) {
  run('ip', ['netns', 'add', SWITCH_NS]);
  run('ip', ['-n', SWITCH_NS, 'link', 'add', BRIDGE, 'type', 'bridge']);
  run('ip', ['-n', SWITCH_NS, 'link', 'set', BRIDGE, 'up']);
  for (const name of machines) {
    const ns = nsOf(name);
    run('ip', ['netns', 'add', ns]);
    run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    // The switch's port and the machine's eth0, one veth pair.
    run('ip', ['-n', SWITCH_NS, 'link', 'add', ns, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
    run('ip', ['-n', SWITCH_NS, 'link', 'set', ns, 'master', BRIDGE]);
    run('ip', ['-n', SWITCH_NS, 'link', 'set', ns, 'up']);
    run('ip', ['-n', ns, 'addr', 'add', `${addressOf(name)}/24`, 'dev', 'eth0']);
    run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
  }
}

/** Unplugs machine `name` from the switch (nothing crosses), or plugs it back. */
export function setPlugged(name, plugged) {
  run('ip', ['-n', SWITCH_NS, 'link', 'set', nsOf(name), plugged ? 'up' : 'down']);
}

/**
 * Cuts machine `name` off from the machines in `others` only (both directions, in its own
 * namespace: nft drops), or, with `others` empty, removes the cut.
 */
export function setCut(name, others) {
  const ns = nsOf(name);
  spawnSync('ip', ['netns', 'exec', ns, 'nft', 'delete', 'table', 'inet', 'lhha_cut'], { stdio: 'ignore' });
  if (others.length === 0) return;
  const set = others.map(addressOf).join(', ');
  const rules = `table inet lhha_cut {
  chain out { type filter hook output priority 0; policy accept; ip daddr { ${set} } drop; }
  chain in { type filter hook input priority 0; policy accept; ip saddr { ${set} } drop; }
}
`;
  run('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], rules);
}
