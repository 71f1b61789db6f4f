import { spawnSync } from 'node:child_process';
import { pgBouncerBinary } from '../support/pgbouncer.js';

/**
 * The system suite needs software that only system packages provide; it refuses to start without
 * it instead of skipping, so a green run always means the tests ran.
 */
export default function requireSystemPackages(): void {
  pgBouncerBinary();
  // The many-hosts harness's network test builds namespaces, veth pairs and nft rules.
  if (process.getuid?.() !== 0) throw new Error('the system suite needs root (network namespaces)');
  for (const [binary, pkg] of [
    ['ip', 'iproute2'],
    ['nft', 'nftables'],
  ] as const) {
    if (spawnSync(binary, ['--version']).error) {
      throw new Error(`the system suite needs ${binary}: apt-get install -y ${pkg}`);
    }
  }
}
