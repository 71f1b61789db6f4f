import type { EnqueueOptions } from '../context/client-options.js';
import type { LeaseholdContext } from '../context/context.js';
import {
  type BulkActionKind,
  type BulkOptions,
  beginBulk,
  bulkActions,
  previewBulk,
} from '../operations/operator/bulk.js';
import { cancel } from '../operations/operator/cancel.js';
import { listDead } from '../operations/operator/dead.js';
import { jobEffects } from '../operations/operator/job-effects.js';
import { getJob } from '../operations/operator/jobs.js';
import {
  type OperatorActionOptions,
  operatorActions,
  pauseQueueAudited,
  pauseScheduleAudited,
} from '../operations/operator/operator-actions.js';
import { blockedKeys } from '../operations/operator/ordering.js';
import { replay } from '../operations/operator/replay.js';
import { type JobSearch, type SearchOptions, searchJobsPage } from '../operations/operator/search.js';
import { enqueue } from '../operations/producer/enqueue.js';
import { enqueueTask } from '../operations/producer/enqueue-task.js';
import { getFlow } from '../operations/producer/flows.js';
import { listSchedules } from '../operations/producer/schedules.js';
import { MetricsRollupService, readMetricsHistory } from '../operations/queues/metrics-history.js';
import { readStats } from '../operations/queues/stats.js';
import type { AnyTask } from '../runtime/task.js';

/**
 * The public calls the dashboard makes, bound to a context: the same functions `Leasehold`'s
 * methods forward to, so the dashboard carries no SQL and needs no client.
 */
export function dashboardApi(context: LeaseholdContext) {
  const { pool, schema } = context;
  return {
    stats: (options: Parameters<typeof readStats>[2]) => readStats(pool, schema, options),
    blockedKeys: (options: Parameters<typeof blockedKeys>[1]) => blockedKeys(context, options),
    listDead: (options: Parameters<typeof listDead>[1]) => listDead(context, options),
    getJob: (id: string, options: { history: true }) => getJob(context, id, options),
    effects: (id: string) => jobEffects(context, id),
    replay: (ids: string[], options: Parameters<typeof replay>[3]) => replay(pool, schema, ids, options),
    cancel: (id: string, options: Parameters<typeof cancel>[2]) => cancel(context, id, options),
    search: (search: JobSearch, options: SearchOptions) => searchJobsPage(pool, schema, search, options),
    previewBulk: (action: BulkActionKind, search: JobSearch) => previewBulk(pool, schema, action, search),
    beginBulk: (action: BulkActionKind, search: JobSearch, options: BulkOptions) =>
      beginBulk(pool, schema, action, search, options),
    bulkActions: (options: { id?: string; limit?: number }) => bulkActions(pool, schema, options),
    metrics: (range: 'hour' | 'day', queue: string | null) => readMetricsHistory(pool, schema, range, queue),
    rollupService: (intervalMs: number, onError: (err: unknown) => void) =>
      new MetricsRollupService(pool, schema, intervalMs, onError),
    // Pauses and resumes, each recorded with actor and reason in operator_actions (017).
    setPaused: (queue: string, paused: boolean, options: OperatorActionOptions) =>
      pauseQueueAudited(context, queue, paused, options),
    setSchedulePaused: (name: string, paused: boolean, options: OperatorActionOptions) =>
      pauseScheduleAudited(context, name, paused, options),
    operatorActions: (limit: number) => operatorActions(context, { limit }),
    enqueue: (queue: string, payload: unknown, options: EnqueueOptions) =>
      enqueue(context, queue, payload, options),
    enqueueTask: (task: AnyTask, payload: unknown, options: EnqueueOptions) =>
      enqueueTask(context, task, payload, options),
    // Cron schedules with their next and last tick; payloads left out (they may hold personal data).
    schedules: async () =>
      (await listSchedules(context, { limit: 100 })).map(({ payload: _payload, ...schedule }) => schedule),
    // Flows (issue 16): the job page's flow section.
    getFlow: (id: string) => getFlow(context, id),
  };
}

/** The dashboard's bound API. */
export type DashboardApi = ReturnType<typeof dashboardApi>;
