// One worker process of the processing workload. Protocol with the parent (over IPC):
//   parent -> {type:'config', config}   child prepares (connects) and answers {type:'ready'}
//   parent -> {type:'start'}            child starts claiming, reporting {type:'handled', handled}
//   parent -> {type:'stop'}             child stops and answers {type:'stopped', handled, errors, stats}
// The child exits by itself if the parent goes away or its own time limit passes.
import { isSystemKey, loadSystem } from './systems.mjs';

const systemKey = process.argv[2];
const REPORT_EVERY_MS = 10;
const MAX_ERRORS_KEPT = 5;

if (!isSystemKey(systemKey)) {
  console.error(`worker-process: unknown system ${systemKey}`);
  process.exit(2);
}
process.on('disconnect', () => process.exit(1));

let handled = 0;
let errorCount = 0;
const errors = [];
const onHandled = (count) => {
  handled += count;
};
const onError = (err) => {
  errorCount++;
  if (errors.length < MAX_ERRORS_KEPT) errors.push(String(err?.message ?? err));
};

process.once('message', async ({ config }) => {
  // Never outlive the parent's own timeout by much, whatever happens.
  setTimeout(() => process.exit(3), config.timeoutMs + 30_000).unref();
  try {
    const system = await loadSystem(systemKey);
    const worker = await system.prepareWorker({ ...config, onHandled, onError });
    let reported = -1;
    const reporter = setInterval(() => {
      if (handled === reported) return;
      reported = handled;
      process.send({ type: 'handled', handled, errorCount, errors });
    }, REPORT_EVERY_MS);
    process.on('message', async (message) => {
      if (message.type === 'start') {
        await worker.start();
      } else if (message.type === 'stop') {
        clearInterval(reporter);
        const stats = await worker.stop();
        process.send({ type: 'stopped', handled, errorCount, errors, stats }, () => process.disconnect());
      }
    });
    process.send({ type: 'ready' });
  } catch (err) {
    process.send({ type: 'failed', message: String(err?.stack ?? err) }, () => process.exit(1));
  }
});
