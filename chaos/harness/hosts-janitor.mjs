// The many-hosts harness's last line of cleanup. chaos/hosts.mjs starts this process in a session
// of its own (so a signal to the harness's process group, e.g. from `timeout`, does not reach it)
// with a pipe on its stdin. The harness writes `done` once it has removed its network itself. If
// the pipe closes without it, the harness died without cleaning up (SIGKILL, or killed before its
// handlers could run): this process then removes every namespace carrying the harness's prefix
// (chaos/faults/netns.mjs, which also ends the processes left inside them) and exits.
import { removeNetwork } from '../faults/netns.mjs';

let said = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  said += chunk;
});
process.stdin.on('close', () => {
  if (said.includes('done')) process.exit(0);
  try {
    removeNetwork();
  } catch {
    // Nobody is left to tell; the next run removes leftovers before it starts.
  }
  process.exit(0);
});
// A session of its own has no terminal to hang up, but be explicit: only the pipe decides.
process.on('SIGHUP', () => {});
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
