// The client's calls that neither a producer nor a worker makes (migrations, operator reads and
// writes, schedules, flows' reads, runUntilIdle), gathered for one dynamic import: `import
// 'leasehold'` does not load them, the first such call does (client.ts).

export { cancel } from './operations/cancel.js';
export { listDead } from './operations/dead.js';
export { blockedFlows, enqueueFlow, getFlow } from './operations/flows.js';
export { checkHealth } from './operations/health.js';
export { getJob } from './operations/jobs.js';
export { forgetQueue } from './operations/known-queues.js';
export { migrate } from './operations/migrate.js';
export { blockedKeys, skip } from './operations/ordering.js';
export { prune } from './operations/prune.js';
export { configureQueueSettings, setQueuePaused } from './operations/queue-settings.js';
export { queueSummaries } from './operations/queues.js';
export { leaseRefusals } from './operations/refusals.js';
export { replay } from './operations/replay.js';
export { rotateLanes } from './operations/rotate-lanes.js';
export { runUntilIdle } from './operations/run-until-idle.js';
export { listSchedules, runSchedules, schedule, setPaused, unschedule } from './operations/schedules.js';
export { setPayloadSearch } from './operations/search.js';
export { readStats } from './operations/stats.js';
