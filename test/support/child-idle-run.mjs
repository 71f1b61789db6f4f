// `lh.runUntilIdle` in a process of its own, so a test can SIGKILL it mid-run. It runs the built
// package (dist/), as users run it. The parent sends one config message; the child reports over
// IPC. Each handler records its run in `runs` inside job.transaction, so a run counts only if its
// fenced completion committed with it.
import { Leasehold } from '../../dist/index.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

process.once('message', async (config) => {
  const lh = new Leasehold({ connectionString: config.databaseUrl, schema: config.schema });
  process.send?.({ type: 'started' });
  const result = await lh.runUntilIdle({
    owner: 'crashing',
    queues: {
      [config.queue]: {
        concurrency: config.concurrency ?? 4,
        leaseMs: config.leaseMs ?? 500,
        handler: async (job) => {
          process.send?.({ type: 'begin', id: job.id });
          await job.transaction(async (tx) => {
            await tx.query(`INSERT INTO "${config.schema}".runs (job_id, runner) VALUES ($1, 'child')`, [
              job.id,
            ]);
            await sleep(config.sleepMs ?? 20);
          });
          process.send?.({ type: 'done', id: job.id });
        },
      },
    },
  });
  process.send?.({ type: 'idle', result });
  await lh.close();
});
