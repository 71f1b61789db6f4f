import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { JobHandler, QueueOptions, WorkerOptions } from '../index.js';
import { CliError, describeError } from './errors.js';

/** Worker-level options a module may set; the CLI supplies the queues and handles signals. */
export type ModuleWorkerOptions = Omit<WorkerOptions, 'queues' | 'handleSignals'>;

/** What a worker module provides. */
export interface WorkerModule {
  /** Queue name to handler or `{ handler, concurrency, leaseMs, ... }`, from the named exports. */
  queues: Record<string, QueueOptions | JobHandler>;
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
 * Reads a module's exports: every named export is a queue (a handler, or an object with a
 * `handler`), except `options`; `default` or `options` holds worker-level options. Shapes are
 * checked here only as far as telling exports apart needs; `lh.worker()` validates the values.
 */
export function workerModuleFrom(exports: Record<string, unknown>, path: string): WorkerModule {
  const { default: defaultExport, options: optionsExport, ...queueExports } = exports;
  if (defaultExport !== undefined && optionsExport !== undefined) {
    throw new CliError(`${path}: export worker options as \`default\` or as \`options\`, not both`);
  }
  const options = readOptions(defaultExport ?? optionsExport ?? {}, path);
  const queues: Record<string, QueueOptions | JobHandler> = {};
  for (const [name, value] of Object.entries(queueExports)) {
    const isQueue =
      typeof value === 'function' ||
      (typeof value === 'object' && value !== null && typeof (value as QueueOptions).handler === 'function');
    if (!isQueue) {
      throw new CliError(
        `${path}: export "${name}" is not a queue: export a handler, async (job) => {...}, or { handler, concurrency, ... }`,
      );
    }
    queues[name] = value as QueueOptions | JobHandler;
  }
  if (Object.keys(queues).length === 0) {
    throw new CliError(
      `${path}: exports no queues; export one handler per queue, e.g. export const emails = async (job) => {...}`,
    );
  }
  return { queues, options };
}

function readOptions(value: unknown, path: string): ModuleWorkerOptions {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CliError(`${path}: the default (or options) export must be an object of worker options`);
  }
  if ('queues' in value) {
    throw new CliError(`${path}: worker options must not hold "queues"; export each queue by name instead`);
  }
  if ('handleSignals' in value) {
    throw new CliError(`${path}: "handleSignals" is not needed; the CLI always stops on SIGTERM and SIGINT`);
  }
  return value as ModuleWorkerOptions;
}
