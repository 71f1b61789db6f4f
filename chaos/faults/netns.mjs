// The many-hosts harness's network (chaos/hosts.mjs): one namespace for PostgreSQL and one per
// worker host, each host joined to the database namespace by its own veth pair. Everything it
// creates carries the prefix `lhh` (namespaces `lhh-db`, `lhh-h<i>`; links `lhh-d<i>` on the
// database side, `lhh-v<i>` on the host side; the nft table `lhh_loss`), and every address is in
// 10.231.0.0/16 inside those namespaces only: host i is 10.231.<i>.2, its database side 10.231.<i>.1.
// Removal deletes exactly what carries the prefix, also what a crashed earlier run left behind.
import { spawnSync } from 'node:child_process';

// Another prefix (lhh and up to four more letters or digits) keeps a test's network apart from a
// run's: removal deletes only what carries the prefix in force.
export const PREFIX = /^lhh[a-z0-9]{0,4}$/.test(process.env.LHH_NETNS_PREFIX ?? '')
  ? process.env.LHH_NETNS_PREFIX
  : 'lhh';
export const DB_NS = `${PREFIX}-db`;
export const MAX_HOSTS = 8;

/** Names and addresses of host `i` (1-based). */
export function hostNames(i) {
  if (!Number.isInteger(i) || i < 1 || i > MAX_HOSTS) throw new Error(`netns: no host ${i}`);
  return {
    ns: `${PREFIX}-h${i}`,
    hostLink: `${PREFIX}-v${i}`,
    dbLink: `${PREFIX}-d${i}`,
    hostAddress: `10.231.${i}.2`,
    dbAddress: `10.231.${i}.1`,
  };
}

/** Runs a command (array form: no shell, no string building); throws with its output on failure. */
export function run(file, args, input) {
  const result = spawnSync(file, args, { input, encoding: 'utf8', timeout: 20_000 });
  if (result.error) throw new Error(`${file} ${args.join(' ')}: ${result.error.message}`);
  if (result.status !== 0)
    throw new Error(`${file} ${args.join(' ')} failed (${result.status}): ${(result.stderr || '').trim()}`);
  return result.stdout;
}

/** Whether `file` can be run (found on PATH and executable). */
export function hasCommand(file, args = ['--version']) {
  const result = spawnSync(file, args, { encoding: 'utf8', timeout: 10_000 });
  return !result.error;
}

/** The namespaces that carry our prefix (ours, or a crashed run's). */
export function ourNamespaces() {
  return run('ip', ['netns', 'list'])
    .split('\n')
    .map((line) => line.split(' ')[0])
    .filter(
      (name) =>
        name === DB_NS || (name.startsWith(`${PREFIX}-h`) && /^\d+$/.test(name.slice(PREFIX.length + 2))),
    );
}

/**
 * Removes every namespace of ours: first ends the processes still inside it (those are ours: a
 * server, workers, relays started in it), then deletes it, which deletes its veth ends (and so
 * their peers) and its nft tables. Returns the names removed.
 */
export function removeNetwork() {
  const names = ourNamespaces();
  for (const name of names) {
    for (const pid of namespacePids(name)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  for (const name of names) {
    try {
      run('ip', ['netns', 'delete', name]);
    } catch {
      // Deleted meanwhile; a leftover is reported by the check below.
    }
  }
  const left = ourNamespaces();
  if (left.length > 0) throw new Error(`netns: could not remove ${left.join(', ')}`);
  return names;
}

function namespacePids(name) {
  try {
    return run('ip', ['netns', 'pids', name])
      .split('\n')
      .filter(Boolean)
      .map(Number)
      .filter((pid) => Number.isInteger(pid) && pid > 1 && pid !== process.pid);
  } catch {
    return [];
  }
}

/** Creates the database namespace and `hosts` host namespaces, each with its veth pair. */
export function createNetwork(hosts) {
  if (!Number.isInteger(hosts) || hosts < 1 || hosts > MAX_HOSTS) throw new Error(`netns: ${hosts} hosts`);
  run('ip', ['netns', 'add', DB_NS]);
  run('ip', ['-n', DB_NS, 'link', 'set', 'lo', 'up']);
  for (let i = 1; i <= hosts; i++) {
    const h = hostNames(i);
    run('ip', ['netns', 'add', h.ns]);
    run('ip', ['-n', h.ns, 'link', 'set', 'lo', 'up']);
    // Created inside the database namespace, its peer moved straight into the host's.
    run('ip', [
      '-n',
      DB_NS,
      'link',
      'add',
      h.dbLink,
      'type',
      'veth',
      'peer',
      'name',
      h.hostLink,
      'netns',
      h.ns,
    ]);
    run('ip', ['-n', DB_NS, 'addr', 'add', `${h.dbAddress}/24`, 'dev', h.dbLink]);
    run('ip', ['-n', h.ns, 'addr', 'add', `${h.hostAddress}/24`, 'dev', h.hostLink]);
    run('ip', ['-n', DB_NS, 'link', 'set', h.dbLink, 'up']);
    run('ip', ['-n', h.ns, 'link', 'set', h.hostLink, 'up']);
  }
}

/** Takes host `i`'s link down (a cut: nothing crosses it) or back up. */
export function setLink(i, up) {
  const h = hostNames(i);
  run('ip', ['-n', h.ns, 'link', 'set', h.hostLink, up ? 'up' : 'down']);
}

/**
 * Drops `pct` percent of the packets crossing host `i`'s link, in both directions, in the host's
 * namespace (nft `numgen random`: real kernel loss, which TCP then retransmits). 0 removes it.
 */
export function setLoss(i, pct) {
  if (!Number.isInteger(pct) || pct < 0 || pct > 100) throw new Error(`netns: loss ${pct}`);
  const h = hostNames(i);
  spawnSync('ip', ['netns', 'exec', h.ns, 'nft', 'delete', 'table', 'inet', 'lhh_loss'], { stdio: 'ignore' });
  if (pct === 0) return;
  const rules = `table inet lhh_loss {
  chain out { type filter hook output priority 0; policy accept; oifname "${h.hostLink}" numgen random mod 100 < ${pct} counter drop; }
  chain in { type filter hook input priority 0; policy accept; iifname "${h.hostLink}" numgen random mod 100 < ${pct} counter drop; }
}
`;
  run('ip', ['netns', 'exec', h.ns, 'nft', '-f', '-'], rules);
}

/** Packets dropped so far by host `i`'s loss rules (0 when none are set). */
export function droppedPackets(i) {
  const h = hostNames(i);
  const result = spawnSync('ip', ['netns', 'exec', h.ns, 'nft', 'list', 'table', 'inet', 'lhh_loss'], {
    encoding: 'utf8',
  });
  if (result.status !== 0) return 0;
  return [...result.stdout.matchAll(/packets (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
}

/** Whether `tc ... netem` works in this kernel (probed on host 1's link, then removed). */
export function netemAvailable(i = 1) {
  const h = hostNames(i);
  const add = spawnSync(
    'ip',
    ['netns', 'exec', h.ns, 'tc', 'qdisc', 'add', 'dev', h.hostLink, 'root', 'netem', 'delay', '1ms'],
    {
      encoding: 'utf8',
    },
  );
  if (add.status !== 0) return false;
  spawnSync('ip', ['netns', 'exec', h.ns, 'tc', 'qdisc', 'del', 'dev', h.hostLink, 'root'], {
    stdio: 'ignore',
  });
  return true;
}
