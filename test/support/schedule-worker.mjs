// A worker process that fires schedules (test/slow/schedules-processes.test.ts): the built package
// (dist/), its scheduler at the default interval, a queue whose handler completes at once. The
// parent sends one config message; the child answers 'started', and stops cleanly on 'stop'.
import { Leasehold } from '../../dist/index.js';

process.once('message', async (config) => {
  const lh = new Leasehold({ connectionString: config.databaseUrl, schema: config.schema });
  const worker = lh.worker({ owner: config.owner, queues: { [config.queue]: async () => {} } });
  worker.on('error', () => {}); // a pass racing a killed sibling may fail; the next one goes on
  await worker.start();
  process.on('message', async (message) => {
    if (message !== 'stop') return;
    await worker.stop();
    await lh.close();
    process.exit(0);
  });
  process.send?.({ type: 'started' });
});
