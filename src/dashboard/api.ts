import type { LeaseholdContext } from '../context.js';
import { cancel } from '../operations/cancel.js';
import { listDead } from '../operations/dead.js';
import { getFlow } from '../operations/flows.js';
import { getJob } from '../operations/jobs.js';
import { blockedKeys } from '../operations/ordering.js';
import { replay } from '../operations/replay.js';
import { readStats } from '../operations/stats.js';

/**
 * The public calls the dashboard makes, bound to a context: the same functions `Leasehold`'s
 * methods forward to, so the dashboard carries no SQL and needs no client.
 */
export function dashboardApi(context: LeaseholdContext) {
  const { pool, schema } = context;
  return {
    stats: (options: Parameters<typeof readStats>[2]) => readStats(pool, schema, options),
    blockedKeys: (options: Parameters<typeof blockedKeys>[2]) => blockedKeys(pool, schema, options),
    listDead: (options: Parameters<typeof listDead>[2]) => listDead(pool, schema, options),
    getJob: (id: string, options: { history: true }) => getJob(context, id, options),
    replay: (ids: string[], options: Parameters<typeof replay>[3]) => replay(pool, schema, ids, options),
    cancel: (id: string, options: Parameters<typeof cancel>[3]) => cancel(pool, schema, id, options),
    // Flows (issue 16): the job page's flow section.
    getFlow: (id: string) => getFlow(context, id),
  };
}
