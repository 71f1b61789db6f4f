import { ValidationError } from '../shared/errors.js';
import type { WorkerEventSource } from './worker-events.js';

/** One log method, pino-style: a structured object first, then a message. */
export type LogMethod = (obj: Record<string, unknown>, msg?: string) => void;

/** A pino-compatible logger (pino itself, or anything with these four methods). */
export interface Logger {
  debug: LogMethod;
  info: LogMethod;
  warn: LogMethod;
  error: LogMethod;
}

/** Longest error message copied into a log line, in characters. */
const MAX_LOGGED_MESSAGE = 300;

/**
 * Logs a worker's events as structured lines: its start (queues and tasks served) at info,
 * completions at debug, retries, recoveries, aborts and dropped outcomes at info, deaths and lost
 * leases at warn (a lost lease once per run, saying what to change), stuck handlers, stalled
 * statements and internal errors at error. Lines carry
 * the queue, job id, attempt, outcome and error code, never the payload, and error messages are
 * cut at 300 characters. Returns a function that stops logging.
 */
export function logWorkerEvents(worker: WorkerEventSource, logger: Logger): () => void {
  const owner = worker.owner;
  const onOutcome: Parameters<typeof worker.on<'outcome'>>[1] = (job, result, detail) => {
    const fields = {
      owner,
      queue: job.queue,
      jobId: job.id,
      attempt: job.attempt,
      outcome: result,
      ...(detail?.errorCode !== undefined && { errorCode: detail.errorCode }),
      durationMs: Math.round(performance.now() - job.startedAt),
    };
    if (result === 'completed' || result === 'snoozed') logger.debug(fields, 'leasehold: job finished');
    else if (result === 'retry') logger.info(fields, 'leasehold: job failed, will retry');
    else if (result === 'dead') logger.warn(fields, 'leasehold: job dead');
    // The run's lost lease was already logged at warn, once, by onLeaseLost.
    else logger.info(fields, 'leasehold: outcome not recorded, the lease was lost');
  };
  const onAborted: Parameters<typeof worker.on<'aborted'>>[1] = (job, reason) =>
    logger.info(
      { owner, queue: job.queue, jobId: job.id, attempt: job.attempt, reason },
      'leasehold: job aborted',
    );
  const onLeaseLost: Parameters<typeof worker.on<'leaseLost'>>[1] = (job, loss) =>
    logger.warn(
      {
        owner,
        queue: job.queue,
        jobId: job.id,
        attempt: job.attempt,
        reason: loss.reason,
        timerLateMs: loss.timerLateMs,
      },
      `leasehold: ${loss.message}`,
    );
  const onStuck: Parameters<typeof worker.on<'stuck'>>[1] = (job) =>
    logger.error(
      { owner, queue: job.queue, jobId: job.id, attempt: job.attempt },
      'leasehold: handler still running after its signal was aborted',
    );
  const onRecovered: Parameters<typeof worker.on<'recovered'>>[1] = (result) => {
    if (result.retried + result.dead > 0) {
      logger.info(
        { owner, retried: result.retried, dead: result.dead },
        'leasehold: recovered expired leases',
      );
    }
  };
  const onStalled: Parameters<typeof worker.on<'stalled'>>[1] = (statement) =>
    logger.error(
      {
        owner,
        statement: statement.statement,
        outstandingMs: Math.round(statement.outstandingMs),
        outstanding: statement.outstanding,
      },
      'leasehold: a statement has waited longer than a lease for its answer',
    );
  const onStarted: Parameters<typeof worker.on<'started'>>[1] = (info) =>
    logger.info({ owner, queues: [...info.queues], tasks: [...info.tasks] }, 'leasehold: worker started');
  const onError = (err: unknown) => logger.error({ owner, err: describe(err) }, 'leasehold: worker error');
  worker.on('started', onStarted);
  worker.on('outcome', onOutcome);
  worker.on('aborted', onAborted);
  worker.on('stuck', onStuck);
  worker.on('leaseLost', onLeaseLost);
  worker.on('recovered', onRecovered);
  worker.on('stalled', onStalled);
  worker.on('error', onError);
  return () => {
    worker.off('started', onStarted);
    worker.off('outcome', onOutcome);
    worker.off('aborted', onAborted);
    worker.off('stuck', onStuck);
    worker.off('leaseLost', onLeaseLost);
    worker.off('recovered', onRecovered);
    worker.off('stalled', onStalled);
    worker.off('error', onError);
  };
}

// Only the error's kind, code and the start of its message: enough to act on, bounded in size.
function describe(err: unknown): { type: string; code?: string; message: string } {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return {
      type: err.name,
      ...(typeof code === 'string' && { code }),
      message: err.message.slice(0, MAX_LOGGED_MESSAGE),
    };
  }
  return { type: typeof err, message: String(err).slice(0, MAX_LOGGED_MESSAGE) };
}

/** Checks that `logger` has the four methods, so a wrong object fails at construction, not at the first event. */
export function assertLogger(logger: unknown, field = 'logger'): asserts logger is Logger {
  const candidate = logger as Record<string, unknown> | null;
  const missing = ['debug', 'info', 'warn', 'error'].filter((m) => typeof candidate?.[m] !== 'function');
  if (typeof logger !== 'object' || logger === null || missing.length > 0) {
    throw new ValidationError(field, `must be a pino-style logger with debug, info, warn and error methods`);
  }
}
