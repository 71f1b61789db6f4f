import type { BulkActionKind } from '../operations/operator/bulk.js';
import { type JobSearch, SEARCH_FILTERS } from '../operations/operator/search.js';
import type { AnyTask } from '../runtime/task.js';
import { ValidationError } from '../shared/errors.js';
import type { DashboardApi } from './api.js';
import { filterControls } from './filters.js';
import { cutText } from './security.js';
import type { ThroughputHistory } from './throughput.js';

/** Longest payload excerpt shown on a job page, in characters. */
export const MAX_PAYLOAD_PREVIEW = 2_000;

/** What a route answers: a status and a JSON body. */
export type Answer = [number, unknown];

/** What the routes need: the API, who acts, the tasks the dashboard was started with. */
export interface RouteContext {
  api: DashboardApi;
  actor: string;
  tasks: ReadonlyMap<string, AnyTask>;
  throughput: ThroughputHistory;
}

// Every filter of storage/operator/search.ts, and the three criteria that are not one of its entries.
const SEARCH_PARAMS = ['task', 'status', 'payload', ...SEARCH_FILTERS.map((filter) => filter.name)];

/** The search a query string or a JSON object names (empty values left out). */
export function searchFrom(source: URLSearchParams | Record<string, unknown>): JobSearch {
  const search: Record<string, string> = {};
  const get = (name: string) =>
    source instanceof URLSearchParams ? source.get(name) : (source[name] as string | undefined);
  for (const name of SEARCH_PARAMS) {
    const value = get(name);
    if (typeof value === 'string' && value.trim() !== '') search[name] = value.trim();
  }
  return search as JobSearch;
}

/** Answers a GET of the JSON API, or null when no route matches. */
export async function getRoute(
  ctx: RouteContext,
  path: string,
  params: URLSearchParams,
): Promise<Answer | null> {
  const { api } = ctx;
  if (path === '/api/overview') return [200, await overview(ctx)];
  if (path === '/api/dead') {
    return [
      200,
      await api.listDead({
        queue: params.get('queue') || undefined,
        errorCode: params.get('errorCode') || undefined,
        cursor: params.get('cursor') || undefined,
        limit: 50,
      }),
    ];
  }
  if (path === '/api/filters') {
    return [200, { controls: filterControls([...ctx.tasks.keys()]), tasks: taskList(ctx) }];
  }
  if (path === '/api/search') {
    const page = await api.search(searchFrom(params), {
      cursor: params.get('cursor') || undefined,
      limit: 50,
    });
    return [200, page];
  }
  if (path === '/api/metrics') {
    const range = params.get('range') === 'day' ? 'day' : 'hour';
    return [200, await api.metrics(range, params.get('queue') || null)];
  }
  if (path === '/api/bulk') return [200, { actions: await api.bulkActions({ limit: 20 }) }];
  const bulk = /^\/api\/bulk\/(\d{1,19})$/.exec(path);
  if (bulk) {
    const [action] = await api.bulkActions({ id: bulk[1] as string });
    return action ? [200, action] : [404, { error: 'no such bulk action' }];
  }
  const job = /^\/api\/jobs\/(\d{1,19})$/.exec(path);
  if (job) return [200, await jobPage(ctx, job[1] as string, params.get('payload') === '1')];
  return null;
}

/** Answers a POST of the JSON API (the caller has checked the role and CSRF), or null. */
export async function postRoute(
  ctx: RouteContext,
  path: string,
  body: Record<string, unknown>,
): Promise<Answer | null> {
  const { api, actor } = ctx;
  const reason = (fallback: string) =>
    typeof body.reason === 'string' && body.reason.trim() ? cutText(body.reason.trim(), 1000) : fallback;
  const action = /^\/api\/jobs\/(\d{1,19})\/(replay|cancel)$/.exec(path);
  if (action) {
    const id = action[1] as string;
    if (action[2] === 'replay') {
      const result = await api.replay([id], { reason: reason('from the dashboard'), actor });
      return [200, { replayed: result.replayed }];
    }
    return [200, await api.cancel(id, { reason: reason('from the dashboard'), actor })];
  }
  // Pauses and resumes of queues and schedules: recorded with the actor and reason (operator_actions).
  const queue = /^\/api\/queues\/([A-Za-z0-9_.:-]{1,128})\/(pause|resume)$/.exec(path);
  if (queue) {
    const pause = queue[2] === 'pause';
    const settings = await api.setPaused(queue[1] as string, pause, {
      actor,
      reason: reason(pause ? 'paused from the dashboard' : 'resumed from the dashboard'),
    });
    return [200, { queue: settings.name, paused: settings.paused }];
  }
  const schedule = /^\/api\/schedules\/([A-Za-z0-9_.:-]{1,128})\/(pause|resume)$/.exec(path);
  if (schedule) {
    const pause = schedule[2] === 'pause';
    const changed = await api.setSchedulePaused(schedule[1] as string, pause, {
      actor,
      reason: reason(pause ? 'paused from the dashboard' : 'resumed from the dashboard'),
    });
    return [200, { schedule: changed.name, paused: changed.paused }];
  }
  if (path === '/api/bulk/preview') {
    const kind = bulkKind(body.action);
    return [200, await api.previewBulk(kind, searchFrom(objectOf(body.filter)))];
  }
  if (path === '/api/bulk') {
    const kind = bulkKind(body.action);
    if (typeof body.expectedCount !== 'number') {
      throw new ValidationError('expectedCount', 'confirm the count the preview showed');
    }
    const started = await api.beginBulk(kind, searchFrom(objectOf(body.filter)), {
      reason: reason(`bulk ${kind} from the dashboard`),
      actor,
      expectedCount: body.expectedCount,
    });
    // Runs on after the answer; its progress and end are in the bulk action log (GET /api/bulk/:id).
    started.finished.catch(() => {});
    return [202, { id: started.id, matched: started.matched }];
  }
  if (path === '/api/enqueue') return [200, await enqueueFromForm(ctx, body)];
  return null;
}

function objectOf(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}

function bulkKind(value: unknown): BulkActionKind {
  if (value === 'replay' || value === 'cancel' || value === 'remove') return value;
  throw new ValidationError('action', 'must be replay, cancel or remove');
}

function taskList(ctx: RouteContext) {
  return [...ctx.tasks.values()].map((task) => ({ name: task.name, hasSchema: task.schema !== undefined }));
}

// A job enqueued from the form: the payload as JSON text; a task's schema validates it.
async function enqueueFromForm(ctx: RouteContext, body: Record<string, unknown>) {
  const name = body.queue;
  if (typeof name !== 'string' || name === '') throw new ValidationError('queue', 'name a queue or a task');
  let payload: unknown;
  try {
    payload = JSON.parse(typeof body.payload === 'string' && body.payload.trim() ? body.payload : 'null');
  } catch {
    throw new ValidationError('payload', 'is not valid JSON');
  }
  const options: { priority?: number; delayMs?: number } = {};
  if (body.priority !== undefined && body.priority !== '') options.priority = Number(body.priority);
  if (body.delayMs !== undefined && body.delayMs !== '') options.delayMs = Number(body.delayMs);
  const task = ctx.tasks.get(name);
  const result = task
    ? await ctx.api.enqueueTask(task, payload, options)
    : await ctx.api.enqueue(name, payload, options);
  return { id: result.id, created: result.created, task: task !== undefined };
}

async function overview(ctx: RouteContext) {
  const [stats, blockedKeys, schedules, operatorActions] = await Promise.all([
    ctx.api.stats({ windowMs: 60_000 }),
    ctx.api.blockedKeys({ limit: 50 }),
    ctx.api.schedules(),
    ctx.api.operatorActions(10),
  ]);
  ctx.throughput.record(
    stats.at.getTime(),
    Object.fromEntries(stats.queues.map((q) => [q.queue, q.completedInWindow])),
  );
  return {
    at: stats.at,
    queues: stats.queues,
    throughput: ctx.throughput.samples(),
    windowTruncated: stats.windowTruncated,
    // Ordering keys held up by a dead head: replay or skip the head to unblock them.
    blockedKeys,
    // Cron schedules (without payloads), pausable from the page.
    schedules,
    // The latest pauses and resumes, with who and why.
    operatorActions,
  };
}

// The payload, the result and the progress detail only when asked for (`?payload=1`), as the CLI's
// `jobs show --payload`: all three are the user's data. The flow the job belongs to beside it (null
// for a job in none); the schedule that made it rides in the job (`schedule`).
async function jobPage(ctx: RouteContext, id: string, withPayload: boolean) {
  const job = await ctx.api.getJob(id, { history: true });
  if (!job) return { job: null, flow: null };
  const { payload, result, progress, ...rest } = job;
  const [effects, flow] = await Promise.all([ctx.api.effects(id), ctx.api.getFlow(id)]);
  return {
    flow,
    job: {
      ...rest,
      payloadPreview: withPayload ? preview(payload) : null,
      resultPreview: withPayload && job.status === 'succeeded' ? preview(result) : null,
      progressPreview: withPayload && progress !== null ? preview(progress) : null,
      effects: effects.map((e) => ({
        name: e.name,
        key: e.effect_key,
        attempt: e.attempt,
        intentAt: e.intent_at,
        resultAt: e.result_at,
        state: e.result_at !== null ? 'done' : 'uncertain',
      })),
    },
  };
}

/** A payload as shown on a job page: JSON, cut at `MAX_PAYLOAD_PREVIEW` characters. */
export function preview(payload: unknown): { text: string; truncated: boolean } {
  let text: string;
  try {
    text = JSON.stringify(payload, null, 2) ?? 'null';
  } catch {
    text = '(not serialisable)';
  }
  return text.length > MAX_PAYLOAD_PREVIEW
    ? { text: text.slice(0, MAX_PAYLOAD_PREVIEW), truncated: true }
    : { text, truncated: false };
}
