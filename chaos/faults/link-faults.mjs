// One worker host of the many-hosts harness as the faults see it: its relay (delay and jitter,
// chaos/faults/relay.mjs, a process inside the host's namespace), its nft loss, and its link, which can
// be cut and restored. The harness process itself runs in the database namespace; it reaches into
// a host's namespace with `ip netns exec` and `ip -n`.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { hostNames, setLink, setLoss } from './netns.mjs';

const RELAY_SCRIPT = fileURLToPath(new URL('./relay.mjs', import.meta.url));
// The relay's port in the host's namespace (a fresh namespace: nothing else listens there).
const RELAY_PORT = 6432;

/** Host `i`: starts its relay towards PostgreSQL's `port` on the host's database-side address. */
export async function startHost(i, port, seed) {
  const names = hostNames(i);
  const child = spawn('ip', ['netns', 'exec', names.ns, process.execPath, RELAY_SCRIPT], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const answers = [];
  const waiters = [];
  child.on('message', (message) => {
    const waiter = waiters.shift();
    if (waiter) waiter(message);
    else answers.push(message);
  });
  const next = (timeoutMs = 10_000) =>
    new Promise((resolve, reject) => {
      if (answers.length > 0) return resolve(answers.shift());
      const timer = setTimeout(() => reject(new Error(`relay of host ${i} did not answer`)), timeoutMs);
      waiters.push((message) => {
        clearTimeout(timer);
        resolve(message);
      });
    });
  child.send({
    type: 'start',
    listenHost: '127.0.0.1',
    listenPort: RELAY_PORT,
    targetHost: names.dbAddress,
    targetPort: port,
    rttMs: 0,
    jitterMs: 0,
    seed,
  });
  const ready = await next();
  if (ready.type !== 'ready') throw new Error(`relay of host ${i}: ${ready.message ?? ready.type}`);
  const impairment = { rttMs: 0, jitterMs: 0, lossPct: 0 };
  return {
    index: i,
    ns: names.ns,
    /** What the host's workers connect to: the relay on the host's own loopback. */
    connectionString: `postgres://postgres@127.0.0.1:${RELAY_PORT}/postgres`,
    get impairment() {
      return { ...impairment };
    },
    /** Sets the added round trip, its jitter (relay) and the packet loss (nft) of the host's link. */
    async impair({ rttMs = 0, jitterMs = 0, lossPct = 0 }) {
      child.send({ type: 'set', rttMs, jitterMs });
      const answer = await next();
      if (answer.type !== 'set') throw new Error(`relay of host ${i}: ${answer.message ?? answer.type}`);
      setLoss(i, lossPct);
      Object.assign(impairment, { rttMs, jitterMs, lossPct });
    },
    /** Cuts the link (`ip link set down` on the host's side): nothing crosses until restore(). */
    cut() {
      setLink(i, false);
    },
    restore() {
      setLink(i, true);
    },
    close() {
      child.kill('SIGKILL');
    },
  };
}
