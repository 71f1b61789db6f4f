// One worker process of the recovery bench, in one of two roles. Protocol with the parent (IPC):
//   parent -> {config}        child connects, builds its worker and answers {type:'ready'}
//   parent -> {type:'start'}  child starts its worker and answers {type:'started'} (survivor: once
//                             its LISTEN connection is up, so no notification can be missed)
//   parent -> {type:'stop'}   child stops its worker and answers {type:'stopped', counters}
// victim:   one queue per name, concurrency = jobs per queue (the library allows at most 1000
//           per queue, so 10,000 held jobs take 10 queues); handlers never return. It claims with
//           a long lease, never renewed, that the parent sets to lapse 1 s after the SIGKILL
//           (see run-once.mjs for why).
// survivor: the same queues with a no-op handler and the settings under test.
// The child exits by itself if the parent goes away or its own time limit passes.
import { Leasehold } from '../../../dist/index.js';

const role = process.argv[2];
if (role !== 'victim' && role !== 'survivor' && role !== 'working-victim') {
  console.error(`recovery worker-process: unknown role ${role}`);
  process.exit(2);
}
process.on('disconnect', () => process.exit(1));

const never = new Promise(() => {});
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

process.once('message', async (config) => {
  setTimeout(() => process.exit(3), config.lifetimeMs).unref();
  try {
    const lh = new Leasehold({
      connectionString: config.connectionString,
      schema: config.schema,
      // The sweep of this process uses the client's backoff for the leases it returns.
      ...(config.backoff ? { backoff: config.backoff } : {}),
    });
    await lh.pool.query('SELECT 1'); // connect before being told anything is ready
    // worker.start() loads the optional tracing API first: load it now, so starting is quick.
    await import('@opentelemetry/api').catch(() => null);
    let cpuAtStart = null;
    let startedJobs = 0;
    let handled = 0;
    const queue =
      role === 'victim'
        ? { handler: () => never, concurrency: config.concurrency, leaseMs: config.leaseMs }
        : role === 'working-victim'
          ? {
              handler: async () => {
                startedJobs++;
                await sleep(config.handlerMs);
                handled++;
              },
              concurrency: config.concurrency,
              leaseMs: config.leaseMs,
            }
          : {
              handler: async () => {},
              concurrency: config.concurrency,
              // null: no prefetch option, the library's adaptive read-ahead.
              ...(config.prefetch === null ? {} : { prefetch: config.prefetch }),
            };
    const worker = lh.worker({
      owner: config.owner,
      queues: Object.fromEntries(config.queues.map((name) => [name, queue])),
      ...(config.workerOptions ?? {}),
    });
    worker.on('error', (err) => console.error(`${role}: ${err?.message ?? err}`));
    if (role === 'working-victim') {
      // Reports every 10 ms: jobs handled, jobs claimed but not started (the buffer), and the sum
      // over queues of the read-ahead and bound its last claim was sized with.
      const sizing = new Map();
      worker.on('claimed', (queue, info) => sizing.set(queue, info));
      setInterval(() => {
        let readAhead = 0;
        let bound = 0;
        for (const info of sizing.values()) {
          readAhead += info.readAhead;
          bound += info.readAheadBound ?? 0;
        }
        const unstarted = worker.counters.claimed - startedJobs;
        process.send({ type: 'progress', handled, unstarted, readAhead, bound });
      }, 10).unref();
    }
    process.on('message', async (message) => {
      if (message.type === 'start') {
        cpuAtStart = process.cpuUsage();
        await worker.start();
        const listens = config.workerOptions?.listen !== false;
        for (let i = 0; listens && worker.listenerPid === null; i++) {
          if (i > 500) {
            const failure = `the ${role} did not connect its listener within 5 s`;
            process.send({ type: 'failed', message: failure }, () => process.exit(1));
            return;
          }
          await sleep(10);
        }
        process.send({ type: 'started' });
      } else if (message.type === 'stop') {
        await worker.stop();
        await lh.close();
        const cpu = process.cpuUsage(cpuAtStart ?? undefined);
        const cpuMs = (cpu.user + cpu.system) / 1000;
        process.send({ type: 'stopped', counters: { ...worker.counters }, cpuMs }, () =>
          process.disconnect(),
        );
      }
    });
    process.send({ type: 'ready' });
  } catch (err) {
    process.send({ type: 'failed', message: String(err?.stack ?? err) }, () => process.exit(1));
  }
});
