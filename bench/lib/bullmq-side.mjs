// BullMQ on Redis as a peer of the 1-by-1 enqueue (issue 39): `queue.add()` per call, its defaults,
// against the Redis at REDIS_URL (default redis://127.0.0.1:6379). Loaded only when that Redis
// answers, from bench/node_modules (bench/install-peers.mjs installs it).
import net from 'node:net';

const QUEUE = 'leasehold-bench';

/** The Redis the bench compares with: host and port of REDIS_URL, or 127.0.0.1:6379. */
export function redisAddress() {
  const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  return { host: url.hostname, port: Number(url.port || 6379) };
}

/** True when something answers a Redis PING at the address within a second. */
export function redisAnswers({ host, port } = redisAddress()) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

/** A BullMQ queue on the bench's Redis: `add(payload)`, `reset()` (obliterate), `count()`, `close()`. */
export async function bullmqQueue() {
  const { Queue } = await import('bullmq');
  const { Redis } = await import('ioredis');
  // BullMQ 6 takes its Redis client as a peer: a constructed one, as its docs say for ESM.
  const connection = new Redis({ ...redisAddress(), maxRetriesPerRequest: null });
  const queue = new Queue(QUEUE, { connection });
  return {
    add: (payload) => queue.add('job', payload),
    reset: () => queue.obliterate({ force: true }),
    count: async () => (await queue.getJobCounts('wait')).wait,
    close: async () => {
      await queue.close();
      connection.disconnect();
    },
  };
}
