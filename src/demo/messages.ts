import type { WorkerCounters } from '../index.js';

/** What a demo worker process needs to run; sent over IPC so no secret appears in argv or env. */
export interface DemoWorkerConfig {
  /** Its number in the demo, 1 to 3. */
  number: number;
  connectionString: string;
  schema: string;
}

/** Messages the orchestrator sends to a worker process. */
export type ToWorkerMessage = { type: 'start'; config: DemoWorkerConfig } | { type: 'stop' };

/** Messages a worker process sends to the orchestrator. */
export type FromWorkerMessage =
  | { type: 'ready'; owner: string }
  /**
   * Periodic: counters, jobs held (running or awaiting their outcome write), handlers running right
   * now, and ids of jobs whose handler succeeded since the last status.
   */
  | { type: 'status'; counters: WorkerCounters; active: number; handling: number; ran: string[] }
  /** After a graceful stop: final counters and the last successful runs. */
  | { type: 'stopped'; counters: WorkerCounters; ran: string[] }
  | { type: 'failed'; message: string };
