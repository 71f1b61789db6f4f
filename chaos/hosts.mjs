// `npm run chaos:hosts`: workers on several hosts, each in its own network namespace, against a
// PostgreSQL in another, through real network faults (link cuts, packet loss, delay and jitter).
// This process stays in the machine's own namespace: it checks what the run needs, removes what a
// crashed earlier run left, builds the network (chaos/faults/netns.mjs), runs the harness itself
// (chaos/harness/hosts-run.mjs) inside the database namespace, and removes the network however that ends.
// See docs/reliability.md, "Many hosts, real network faults".
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createNetwork, DB_NS, hasCommand, removeNetwork } from './faults/netns.mjs';
import { HOSTS_USAGE, parseHostsOptions } from './records/hosts-options.mjs';

const RUN_SCRIPT = fileURLToPath(new URL('./harness/hosts-run.mjs', import.meta.url));
const JANITOR_SCRIPT = fileURLToPath(new URL('./harness/hosts-janitor.mjs', import.meta.url));
// After a signal, how long the harness gets to stop its server and workers before it is killed.
const STOP_GRACE_MS = 15_000;
let janitor = null;

function main() {
  const options = parseHostsOptions(process.argv.slice(2));
  if (options.help) {
    console.log(HOSTS_USAGE);
    return 0;
  }
  if (options.error) {
    console.error(`chaos:hosts: ${options.error}\n\n${HOSTS_USAGE}`);
    return 2;
  }
  if (process.getuid?.() !== 0) {
    console.error(
      'chaos:hosts: this harness needs root: it creates network namespaces, veth pairs and nft rules. Run it as root (e.g. sudo npm run chaos:hosts).',
    );
    return 2;
  }
  if (!hasCommand('ip', ['-V'])) {
    console.error('chaos:hosts: the `ip` command is missing: apt-get install iproute2');
    return 2;
  }
  if (!hasCommand('nft', ['--version'])) {
    console.error(
      'chaos:hosts: the `nft` command is missing (packet loss uses nftables): apt-get install nftables',
    );
    return 2;
  }
  // Started before the network exists: if this process is killed (even by SIGKILL) from here on,
  // the janitor removes the network.
  janitor = spawn(process.execPath, [JANITOR_SCRIPT], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  janitor.on('error', () => {});
  janitor.unref();
  janitor.stdin.on('error', () => {});
  janitor.stdin.unref?.(); // the pipe alone must not keep this process alive
  const leftovers = removeNetwork();
  if (leftovers.length > 0)
    console.error(`chaos:hosts: removed leftovers of an earlier run: ${leftovers.join(', ')}`);
  try {
    createNetwork(options.hosts);
  } catch (err) {
    console.error(`chaos:hosts: could not build the network: ${err.message}`);
    cleanUp();
    return Promise.resolve(2);
  }
  return new Promise((resolve) => {
    const child = spawn('ip', ['netns', 'exec', DB_NS, process.execPath, RUN_SCRIPT], {
      stdio: 'inherit',
      env: {
        ...process.env,
        LHH_HOSTS_OPTIONS: JSON.stringify(options),
        LHH_HOSTS_ARGV: process.argv.slice(2).join(' '),
      },
    });
    // A signal (Ctrl-C, `timeout`'s SIGTERM, a closed terminal's SIGHUP) is passed on: the child
    // stops its processes and server and exits 2; this process then removes the network. If the
    // child has not gone within STOP_GRACE_MS, it is killed and the network removed anyway.
    let signalled = false;
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
      process.on(signal, () => {
        child.kill('SIGTERM');
        if (signalled) return;
        signalled = true;
        setTimeout(() => {
          console.error(`chaos:hosts: the harness did not stop within ${STOP_GRACE_MS} ms; killing it`);
          child.kill('SIGKILL');
          cleanUp();
          process.exit(2);
        }, STOP_GRACE_MS).unref();
      });
    }
    child.on('exit', (code, signal) => {
      cleanUp();
      resolve(code ?? (signal ? 2 : 2));
    });
    child.on('error', (err) => {
      console.error(`chaos:hosts: could not start the harness: ${err.message}`);
      cleanUp();
      resolve(2);
    });
  });
}

function cleanUp() {
  try {
    removeNetwork();
    // Removed: the janitor has nothing left to do.
    janitor?.stdin.end('done');
  } catch (err) {
    console.error(`chaos:hosts: ${err.message}`);
  }
}

Promise.resolve(main())
  .then((code) => {
    process.exitCode = code;
  })
  .catch((err) => {
    console.error(`chaos:hosts failed: ${err?.stack ?? err}`);
    cleanUp();
    process.exitCode = 2;
  });
