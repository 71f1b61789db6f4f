import type { ResolvedQueue } from '../options.js';
import type { OutcomeResult } from '../outcome-batcher.js';
import { PermanentError } from '../run/job-errors.js';
import { completionOf } from '../run/job-output.js';
import { failOutcome, type RunHost, reportOutcome } from '../run/job-run.js';
import { applyTaskSchema } from '../run/payload-schema.js';
import type { OutcomeDetail } from '../telemetry-events.js';
import type { BatchItem } from './batch-job.js';
import type { BatchHandler, ResolvedBatch } from './batch-options.js';

/** Error code of a batch whose handler resolved to something other than nothing or one result per job. */
export const BATCH_RESULT_CODE = 'BATCH_RESULT';

interface Waiting {
  item: BatchItem;
  /** Resolves once the item's outcome is answered and counted. */
  done: () => void;
}

interface Settling {
  outcome: Promise<OutcomeResult> | null;
  detail: OutcomeDetail;
}

/**
 * Gathers one queue's started jobs into batches and runs its batch handler on each. The queue
 * runner's slot accounting stays per job (a batch of 100 takes 100 slots); each job keeps its own
 * lease, renewed by the lease keeper, its own fence and its own history. A batch runs once it has
 * `size` jobs, or when `waitMs` has passed since its first job joined (0: on the next turn, so the
 * jobs one claim brought go together). When the handler resolves, the completions of every job it
 * did not settle alone are queued together, so the outcome batcher sends them in one fenced
 * statement; a throw fails each of them by the error's class. Only a queue with `batch` has one of
 * these: a plain queue's jobs never pass here.
 */
export class BatchRunner {
  readonly #waiting: Waiting[] = [];
  #timer: NodeJS.Timeout | null = null;
  #immediate: NodeJS.Immediate | null = null;

  constructor(
    private readonly host: RunHost,
    private readonly config: ResolvedQueue & { batch: ResolvedBatch },
    /** Told once per job when the batch's handler returned or threw (the slot's write is then in flight). */
    private readonly queue: { handlerSettled(): void },
    /** Stops renewing a job settled alone while its batch runs on (its lease ends with its outcome). */
    private readonly release: (item: BatchItem) => void,
  ) {}

  /** Adds a started job to the next batch; resolves once its outcome is answered and counted. */
  add(item: BatchItem): Promise<void> {
    item.settleAlone = (error, classifyAs) => this.#settleAlone(item, error, classifyAs);
    return new Promise((done) => {
      this.#waiting.push({ item, done });
      if (this.#waiting.length >= this.config.batch.size) this.#dispatch();
      else this.#schedule();
    });
  }

  /** Runs the jobs still waiting for their batch to fill now (the worker is stopping). */
  flush(): void {
    while (this.#waiting.length > 0) this.#dispatch();
  }

  #schedule(): void {
    if (this.#timer !== null || this.#immediate !== null) return;
    const { waitMs } = this.config.batch;
    if (waitMs === 0) this.#immediate = setImmediate(() => this.#dispatch());
    else this.#timer = setTimeout(() => this.#dispatch(), waitMs);
  }

  #dispatch(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    if (this.#immediate !== null) clearImmediate(this.#immediate);
    this.#timer = null;
    this.#immediate = null;
    const batch = this.#waiting.splice(0, this.config.batch.size);
    if (batch.length > 0) void this.#run(batch);
    if (this.#waiting.length >= this.config.batch.size) this.#dispatch();
    else if (this.#waiting.length > 0) this.#schedule();
  }

  async #run(batch: Waiting[]): Promise<void> {
    const { host, config } = this;
    const settling = new Map<BatchItem, Settling>();
    const jobs: BatchItem[] = [];
    try {
      for (const { item } of batch) {
        host.takeTraceparent(item.id); // batches are not traced per job: drop what the claim read
        if (config.schema === null) jobs.push(item);
        else {
          // A payload that does not match the task's schema fails alone, before the handler runs.
          try {
            await applyTaskSchema(item, config.schema);
            jobs.push(item);
          } catch (err) {
            settling.set(item, this.#failed(item, err));
          }
        }
      }
      let value: unknown;
      let error: unknown;
      let threw = false;
      for (const item of jobs) item.joinBatch(jobs, host.store);
      if (jobs.length > 0) {
        try {
          value = await (config.handler as BatchHandler)(jobs);
          if (value !== undefined && !(Array.isArray(value) && value.length === jobs.length)) {
            throw new PermanentError(
              `a batch handler resolves to nothing or to an array of one result per job (${jobs.length}); ` +
                `it resolved to ${Array.isArray(value) ? `an array of ${value.length}` : typeof value}`,
              { code: BATCH_RESULT_CODE },
            );
          }
        } catch (err) {
          threw = true;
          error = err;
        }
      }
      // Every unsettled job's write is queued in this one synchronous loop: one flush carries them all.
      jobs.forEach((item, i) => {
        if (item.aloneOutcome !== null) return; // counted when its own write was answered
        if (threw) settling.set(item, this.#failed(item, error));
        else settling.set(item, this.#completed(item, (value as readonly unknown[] | undefined)?.[i]));
      });
    } finally {
      for (const { item } of batch) {
        item.settled = true;
        this.queue.handlerSettled();
      }
    }
    await Promise.all(
      batch.map(async ({ item, done }) => {
        const settled = settling.get(item);
        if (settled?.outcome) host.count(item, await settled.outcome, settled.detail);
        else if (item.aloneOutcome !== null) await item.aloneOutcome.catch(() => {});
        done();
      }),
    );
  }

  #completed(item: BatchItem, value: unknown): Settling {
    try {
      const completion = completionOf(item, value, this.host.maxResultBytes);
      return {
        outcome: reportOutcome(this.host, item, () => this.host.batcher.complete(completion)),
        detail: {},
      };
    } catch (err) {
      return this.#failed(item, err); // its result cannot be kept: this job fails, not the batch
    }
  }

  #failed(item: BatchItem, err: unknown, classifyAs: unknown = err): Settling {
    const detail: OutcomeDetail = {};
    return { outcome: failOutcome(this.host, item, this.config, err, detail, classifyAs), detail };
  }

  // `fail` or `retry` inside the handler: this item's failure is written now, and counted when answered.
  async #settleAlone(item: BatchItem, error: unknown, classifyAs: unknown): Promise<OutcomeResult> {
    this.release(item); // a renewal after its failure is written would only be refused
    const { outcome, detail } = this.#failed(item, error, classifyAs);
    if (outcome === null) return 'lost'; // reportOutcome counted it: the lease was gone
    const result = await outcome;
    this.host.count(item, result, detail);
    return result;
  }
}
