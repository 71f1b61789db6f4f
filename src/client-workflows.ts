import type { LeaseholdOptions } from './client-options.js';
import { attachContext, type LeaseholdContext, publicCall, resolveContext } from './context.js';
import type { SchedulerResult } from './maintenance/scheduler.js';
import type { SendEventInput, SendEventResult } from './operations/events.js';
import type { BlockedFlow, EnqueueFlowResult, FlowNode, FlowView } from './operations/flows.js';
import type { RunUntilIdleOptions } from './operations/run-until-idle.js';
import type { ScheduleInfo, ScheduleOptions } from './operations/schedules.js';
import {
  type EnqueueAndWaitOptions,
  enqueueAndWait,
  type WaitForOptions,
  type WaitForResult,
  waitFor,
} from './operations/wait-for.js';
import type { IdleRunResult } from './runtime/idle-run.js';
import type { AnyTask, TaskPayload, TaskResult } from './runtime/task.js';
import type { Queryable } from './storage/db.js';

// Schedules, flows and runUntilIdle load on their first call (see operator-calls.ts).
const operatorCalls = () => import('./operator-calls.js');

/**
 * The calls that build on the job lifecycle rather than move one lease: cron schedules, flows,
 * waiting for a job, and idle runs. `Leasehold` extends this class; it lives apart only to keep
 * each file readable in one sitting. It resolves the client's context (src/context.ts) once, and
 * every method forwards to the module of its call (src/operations/).
 */
export class LeaseholdWorkflows {
  readonly #context: LeaseholdContext;

  constructor(options: LeaseholdOptions = {}) {
    this.#context = resolveContext(options);
    attachContext(this, this.#context);
  }
  /**
   * Creates or updates the cron schedule `name` (kept in the database, so every process sees it):
   * each tick enqueues exactly one job to the task or queue, fired by every worker's scheduler.
   * Cron, zone, payload (by the task's schema) and job fields are checked now (`ValidationError`).
   */
  schedule(name: string, options: ScheduleOptions): Promise<ScheduleInfo> {
    return publicCall(this.#context, 'schedule', () =>
      operatorCalls().then((calls) => calls.schedule(this.#context, name, options)),
    );
  }

  /** Removes a schedule (jobs it fired stay); false when none had that name. */
  unschedule(name: string): Promise<boolean> {
    return publicCall(this.#context, 'unschedule', () =>
      operatorCalls().then((calls) => calls.unschedule(this.#context, name)),
    );
  }

  /** Every schedule in name order, with its next and last tick and paused flag. */
  schedules(options?: { limit?: number }): Promise<ScheduleInfo[]> {
    return publicCall(this.#context, 'schedules', () =>
      operatorCalls().then((calls) => calls.listSchedules(this.#context, options)),
    );
  }

  /** Stops a schedule firing; `ValidationError` when none has that name. */
  pauseSchedule(name: string): Promise<ScheduleInfo> {
    return publicCall(this.#context, 'pauseSchedule', () =>
      operatorCalls().then((calls) => calls.setPaused(this.#context, name, true)),
    );
  }

  /** Lets a paused schedule fire again, from its next tick on (ticks named while paused do not fire). */
  resumeSchedule(name: string): Promise<ScheduleInfo> {
    return publicCall(this.#context, 'resumeSchedule', () =>
      operatorCalls().then((calls) => calls.setPaused(this.#context, name, false)),
    );
  }

  /** One scheduler pass now (workers run one every second): fires every due tick, one job each. */
  runSchedules(): Promise<SchedulerResult> {
    return publicCall(this.#context, 'runSchedules', () =>
      operatorCalls().then((calls) => calls.runSchedules(this.#context)),
    );
  }

  // Flows (issue 16): jobs that depend on jobs.

  /**
   * Enqueues a graph of jobs in one statement, all or nothing (joining `client`'s transaction): a
   * job runs once every job it `dependsOn` succeeded. Cycles, unknown or duplicate refs and graphs
   * over the bounds are a `ValidationError`, nothing written. Returns the job ids by ref.
   */
  enqueueFlow(nodes: readonly FlowNode[], options?: { client?: Queryable }): Promise<EnqueueFlowResult> {
    return publicCall(this.#context, 'enqueueFlow', () =>
      operatorCalls().then((calls) => calls.enqueueFlow(this.#context, nodes, options)),
    );
  }

  /** The flow holding job `id`: every node with its status and parents; null when none. */
  getFlow(id: string | bigint | number): Promise<FlowView | null> {
    return publicCall(this.#context, 'getFlow', () =>
      operatorCalls().then((calls) => calls.getFlow(this.#context, id)),
    );
  }

  /** Flows stalled on a dead or cancelled job, longest stalled first: replay the job to resume. */
  blockedFlows(options?: { limit?: number }): Promise<BlockedFlow[]> {
    return publicCall(this.#context, 'blockedFlows', () =>
      operatorCalls().then((calls) => calls.blockedFlows(this.#context, options)),
    );
  }

  /**
   * Sends event `name` with `key` and a JSON `payload` (at most 1 MiB): every job waiting on that
   * name and key (`job.waitForEvent`) resumes with it, once; a wait that begins within 24 h after
   * finds it too. With `client`, sent in that transaction (a rollback wakes nothing).
   */
  sendEvent(name: string, event: SendEventInput, options?: { client?: Queryable }): Promise<SendEventResult> {
    return publicCall(this.#context, 'sendEvent', () =>
      import('./operations/events.js').then((events) =>
        events.sendEvent(this.#context, name, event, options),
      ),
    );
  }

  /**
   * Recovers expired leases, then runs the given queues and tasks (as a worker would) until none
   * has a job claimable now (database time) or `maxJobs` / `maxMs` is hit; unstarted leases are
   * handed back. Resolves with what ran: `{ succeeded, failed, dead, snoozed, lost, recovered, endedBy }`.
   */
  runUntilIdle(options: RunUntilIdleOptions): Promise<IdleRunResult> {
    return publicCall(this.#context, 'runUntilIdle', () =>
      operatorCalls().then((calls) => calls.runUntilIdle(this.#context, options)),
    );
  }

  /**
   * Resolves `{ id, status: 'succeeded', result }` once the job has succeeded; rejects with
   * `JobDeadError` / `JobCancelledError` (its last error summary), `JobNotFoundError`,
   * `WaitTimeoutError` after `timeoutMs`, or `WaitAbortedError` when `signal` aborts. Wakes on a
   * notification from the statement that ends the job, and polls (1 s) in case one is lost.
   */
  waitFor<Result = unknown>(
    id: string | bigint | number,
    options?: WaitForOptions,
  ): Promise<WaitForResult<Result>> {
    return publicCall(
      this.#context,
      'waitFor',
      () => waitFor(this.#context, id, options) as Promise<WaitForResult<Result>>,
    );
  }

  /** Enqueues, then waits for the job as `waitFor` does; for a task, `result` is typed by its handler. */
  enqueueAndWait<T extends AnyTask>(
    task: T,
    payload: TaskPayload<T>,
    options?: EnqueueAndWaitOptions,
  ): Promise<WaitForResult<TaskResult<T>>>;
  enqueueAndWait(queue: string, payload: unknown, options?: EnqueueAndWaitOptions): Promise<WaitForResult>;
  enqueueAndWait(
    target: string | AnyTask,
    payload: unknown,
    options?: EnqueueAndWaitOptions,
  ): Promise<WaitForResult> {
    return publicCall(this.#context, 'enqueueAndWait', () =>
      enqueueAndWait(this.#context, target, payload, options),
    );
  }
}
