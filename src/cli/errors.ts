import { isLeaseholdError } from '../index.js';

/** A failure the CLI explains in one line, without a stack trace (bad input, a refused operation). */
export class CliError extends Error {
  /** The process exit code to leave with. */
  readonly exitCode: number;

  constructor(message: string, exitCode = 1) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

/**
 * One line saying what went wrong. Leasehold errors already carry a clear message; driver and
 * network errors are reduced to their message or code, since a stack trace helps no operator here.
 */
export function describeError(err: unknown): string {
  if (err instanceof CliError) return err.message;
  // A named statement ("leasehold_list_queues_a9dd733856 failed: ...") means nothing to an operator.
  if (isLeaseholdError(err)) return err.message.replace(STATEMENT_PREFIX, 'the database refused: ');
  return firstLine(plainMessage(err));
}

const STATEMENT_PREFIX = /^leasehold_[a-z0-9_]+_[0-9a-f]{10} failed: /;

function plainMessage(err: unknown): string {
  if (err instanceof AggregateError && err.message === '') {
    // Connecting to "localhost" tries every address; Node reports the failures together, with an
    // empty message of its own.
    return [...new Set(err.errors.map(plainMessage))].join('; ') || 'connection failed';
  }
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    if (err.message) return err.message;
    return typeof code === 'string' ? code : err.name;
  }
  return String(err);
}

function firstLine(text: string): string {
  const line = text.split('\n', 1)[0]?.trim() ?? '';
  return line.length > 0 ? line : 'unknown error';
}
