import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { JobHandler, QueueOptions, WorkerOptions, WorkerTask } from '../index.js';
import { CliError, describeError } from './errors.js';

/** Worker-level options a module may set; the CLI supplies the queues and handles signals. */
export type ModuleWorkerOptions = Omit<WorkerOptions, 'queues' | 'tasks' | 'handleSignals'>;

/** What a worker module provides. */
export interface WorkerModule {
  /** Queue name to handler or `{ handler, concurrency, leaseMs, ... }`, from the named exports. */
  queues: Record<string, QueueOptions | JobHandler>;
  /** Tasks made by `defineTask`, exported alone or in arrays; each runs on the queue of its name. */
  tasks: WorkerTask[];
  /** Worker-level options, from the `default` or `options` export. */
  options: ModuleWorkerOptions;
}

/** Imports a worker module (a path relative to `cwd`) and reads its queues and options. */
export async function loadWorkerModule(path: string, cwd = process.cwd()): Promise<WorkerModule> {
  const file = resolve(cwd, path);
  if (!existsSync(file)) throw new CliError(`worker module not found: ${file}`);
  let exports: Record<string, unknown>;
  try {
    exports = await import(pathToFileURL(file).href);
  } catch (err) {
    throw new CliError(`could not load worker module ${path}: ${describeError(err)}`);
  }
  return workerModuleFrom(exports, path);
}

/**
 * Reads a module's exports: every named export but `options` is a queue (a handler, or an object
 * with a `handler`, served under the export's name) or a task made by `defineTask` (or an array of
 * them, each served under its own name, as `lh.worker({ tasks })` does); `default` or `options`
 * holds worker-level options. Shapes are checked here only as far as telling exports apart needs;
 * the worker validates the values (a task name served twice, a queue option out of range).
 */
export function workerModuleFrom(exports: Record<string, unknown>, path: string): WorkerModule {
  const { default: defaultExport, options: optionsExport, ...queueExports } = exports;
  if (defaultExport !== undefined && optionsExport !== undefined) {
    throw new CliError(`${path}: export worker options as \`default\` or as \`options\`, not both`);
  }
  const options = readOptions(defaultExport ?? optionsExport ?? {}, path);
  const queues: Record<string, QueueOptions | JobHandler> = {};
  const tasks: WorkerTask[] = [];
  const add = (task: WorkerTask) => {
    // One task exported twice (alone and in an array) is served once.
    if (!tasks.includes(task)) tasks.push(task);
  };
  for (const [name, value] of Object.entries(queueExports)) {
    if (isTask(value)) add(value);
    else if (Array.isArray(value) && value.length > 0 && value.every(isTask)) value.forEach(add);
    else if (isQueue(value)) queues[name] = value;
    else {
      throw new CliError(
        `${path}: export "${name}" is not a queue: export a task made by defineTask (or an array of them), a handler, async (job) => {...}, or { handler, concurrency, ... }`,
      );
    }
  }
  if (Object.keys(queues).length === 0 && tasks.length === 0) {
    throw new CliError(
      `${path}: exports no queues; export tasks made by defineTask, or one handler per queue, e.g. export const emails = async (job) => {...}`,
    );
  }
  return { queues, tasks, options };
}

// A task from defineTask (runtime/task.ts): its name, its queue options with the handler, and its
// schema (undefined when it has none). Told apart structurally, as lh.worker({ tasks }) does: the
// module may have imported another copy of leasehold than the CLI's.
function isTask(value: unknown): value is WorkerTask {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const task = value as Partial<WorkerTask>;
  return (
    typeof task.name === 'string' &&
    'schema' in task &&
    typeof task.queue === 'object' &&
    task.queue !== null &&
    typeof task.queue.handler === 'function'
  );
}

function isQueue(value: unknown): value is QueueOptions | JobHandler {
  return (
    typeof value === 'function' ||
    (typeof value === 'object' && value !== null && typeof (value as QueueOptions).handler === 'function')
  );
}

function readOptions(value: unknown, path: string): ModuleWorkerOptions {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CliError(`${path}: the default (or options) export must be an object of worker options`);
  }
  if ('queues' in value || 'tasks' in value) {
    const key = 'queues' in value ? 'queues' : 'tasks';
    throw new CliError(`${path}: worker options must not hold "${key}"; export each queue or task instead`);
  }
  if ('handleSignals' in value) {
    throw new CliError(`${path}: "handleSignals" is not needed; the CLI always stops on SIGTERM and SIGINT`);
  }
  return value as ModuleWorkerOptions;
}
