// `npm run chaos:ha -- --manager patroni|pg_auto_failover --mode sync|async`: Leasehold under a
// real failover manager, in network namespaces, with repeated automatic failovers. This process
// stays in the machine's own namespace: it checks it runs as root, installs the packages the
// manager needs (chaos/ha/ha-packages.mjs), removes what a crashed earlier run left, builds the
// network (chaos/ha/ha-net.mjs), runs the rig (chaos/ha/ha-run.mjs) inside the `ctl` namespace, and
// removes the network however that ends. See docs/reliability.md, "Failover managers".
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createNetwork, nsOf, removeNetwork } from './ha/ha-net.mjs';
import { HA_USAGE, parseHaOptions } from './ha/ha-options.mjs';
import { ensurePackages } from './ha/ha-packages.mjs';

const RUN_SCRIPT = fileURLToPath(new URL('./ha/ha-run.mjs', import.meta.url));

async function main() {
  const argv = process.argv.slice(2);
  const options = parseHaOptions(argv);
  if (options.help) {
    console.log(HA_USAGE);
    return 0;
  }
  if (options.error) {
    console.error(`chaos:ha: ${options.error}\n\n${HA_USAGE}`);
    return 2;
  }
  if (process.getuid?.() !== 0) {
    console.error('chaos:ha: needs root (network namespaces, apt-get, processes run as the postgres user)');
    return 2;
  }
  const missing = ensurePackages(options.manager, (m) => console.error(`chaos:ha: ${m}`));
  if (missing !== null) {
    console.error(`chaos:ha: ${missing}`);
    return 2;
  }
  const leftovers = removeNetwork();
  if (leftovers.length > 0)
    console.error(`chaos:ha: removed leftovers of an earlier run: ${leftovers.join(', ')}`);
  const machines = ['ctl', 'dcs', 'pg1', 'pg2', 'pg3'];
  for (let i = 1; i <= options.workerHosts; i++) machines.push(`w${i}`);
  try {
    createNetwork(machines);
    const child = spawn('ip', ['netns', 'exec', nsOf('ctl'), process.execPath, RUN_SCRIPT, ...argv], {
      stdio: 'inherit',
    });
    for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
    return await new Promise((resolve) => {
      child.on('exit', (code, signal) => resolve(code ?? (signal ? 2 : 0)));
      child.on('error', () => resolve(2));
    });
  } finally {
    // Every process left in our namespaces is the rig's (servers, agents, workers): ended here.
    removeNetwork();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`chaos:ha failed: ${err?.stack ?? err}`);
    removeNetwork();
    process.exit(2);
  },
);
