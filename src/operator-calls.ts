// The client's calls that neither a producer nor a worker makes (migrations, operator reads and
// writes, schedules, flows' reads, runUntilIdle), gathered for one dynamic import: `import
// 'leasehold'` does not load them, the first such call does (client.ts).

export { cancel } from './operations/operator/cancel.js';
export { listDead } from './operations/operator/dead.js';
export { getJob } from './operations/operator/jobs.js';
export { blockedKeys, skip } from './operations/operator/ordering.js';
export { replay } from './operations/operator/replay.js';
export { setPayloadSearch } from './operations/operator/search.js';
export { blockedFlows, enqueueFlow, getFlow } from './operations/producer/flows.js';
export {
  listSchedules,
  runSchedules,
  schedule,
  setPaused,
  unschedule,
} from './operations/producer/schedules.js';
export { forgetQueue } from './operations/queues/known-queues.js';
export { configureQueueSettings, setQueuePaused } from './operations/queues/queue-settings.js';
export { queueSummaries } from './operations/queues/queues.js';
export { readStats } from './operations/queues/stats.js';
export { checkHealth } from './operations/schema/health.js';
export { migrate } from './operations/schema/migrate.js';
export { prune } from './operations/schema/prune.js';
export { rotateLanes } from './operations/schema/rotate-lanes.js';
export { leaseRefusals } from './operations/worker/refusals.js';
export { runUntilIdle } from './operations/worker/run-until-idle.js';
