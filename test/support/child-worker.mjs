// A worker in a process of its own, so tests can SIGKILL or SIGSTOP it. It runs the built package
// (dist/), exactly as users run it. The parent sends one config message; the child reports over IPC.
import pg from 'pg';
import { Leasehold } from '../../dist/index.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

process.once('message', async (config) => {
  const lh = new Leasehold({
    connectionString: config.databaseUrl,
    schema: config.schema,
    backoff: { baseMs: 0, maxMs: 0 },
  });
  const downstream = new pg.Pool({ connectionString: config.databaseUrl, max: 2 });
  const handlers = {
    // Sleeps, reporting progress, then completes.
    slow: async (job) => {
      process.send?.({ type: 'begin', id: job.id });
      await sleep(config.sleepMs ?? 20);
      await job.progress();
      process.send?.({ type: 'done', id: job.id });
    },
    // Calls the fake downstream (which deduplicates by idempotency key), then hangs before completing.
    'effect-then-hang': async (job) => {
      await downstream.query(
        `INSERT INTO "${config.schema}".downstream_calls (idempotency_key, job_id, caller) VALUES ($1, $2, $3)`,
        [job.idempotencyKey, job.id, 'child'],
      );
      process.send?.({ type: 'effect', id: job.id, key: job.idempotencyKey });
      await new Promise(() => {});
    },
    // Durable steps a, b, c, each recording its call in step_calls; hangs after step `hangAfter`.
    steps: async (job) => {
      const results = [];
      for (const name of ['a', 'b', 'c']) {
        results.push(
          await job.step(name, async () => {
            await downstream.query(
              `INSERT INTO "${config.schema}".step_calls (job_id, step, caller) VALUES ($1, $2, 'child')`,
              [job.id, name],
            );
            return { name, by: 'child' };
          }),
        );
        process.send?.({ type: 'step', id: job.id, name });
        if (name === config.hangAfter) await new Promise(() => {});
      }
      return results;
    },
    // Invokes a job on queue `invokeQueue`, then, instead of handing itself back to wait for it,
    // reports and hangs holding its lease: a process to kill between an invoke and its child's end.
    'invoke-then-hang': async (job) => {
      try {
        return await job.invoke(config.invokeQueue, { from: job.id });
      } catch (err) {
        if (err?.name !== 'SnoozeError') throw err;
        process.send?.({ type: 'invoked', id: job.id });
        await new Promise(() => {});
      }
    },
  };
  // A batch handler: reports the batch's ids as it starts and once it is done, then completes them all.
  const batchHandlers = {
    'batch-slow': async (jobs) => {
      const ids = jobs.map((job) => job.id).join(',');
      process.send?.({ type: 'begin', id: ids });
      await sleep(config.sleepMs ?? 20);
      process.send?.({ type: 'done', id: ids });
    },
  };
  const batched = config.batchSize !== undefined;
  const worker = lh.worker({
    owner: config.owner,
    queues: {
      [config.queue]: {
        handler: batched ? batchHandlers[config.mode] : handlers[config.mode],
        ...(batched ? { batch: { size: config.batchSize } } : {}),
        concurrency: config.concurrency ?? 4,
        leaseMs: config.leaseMs ?? 1000,
        renew: 'alive',
      },
    },
    pollIntervalMs: 50,
    recoveryIntervalMs: 0,
  });
  // Heard, a lost database (a test restarting the server) is one error sent to the parent, not a
  // process warning printed into the test run's output.
  worker.on('error', (err) => process.send?.({ type: 'error', message: String(err) }));
  await worker.start();
  process.send?.({ type: 'started' });
});
