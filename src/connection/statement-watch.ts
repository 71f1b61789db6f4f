/** A statement that has been waiting for its answer (the oldest one outstanding). */
export interface OutstandingStatement {
  /** The statement's name (`leasehold_complete_jobs_...`), or `query` for unnamed SQL. */
  statement: string;
  /** How long it has been waiting for its answer, in ms. */
  outstandingMs: number;
  /** Statements outstanding in all on this client's connections. */
  outstanding: number;
}

const NAMED = /^\/\* (leasehold_[a-z0-9_]+) \*\//;

/**
 * Keeps the start time of every statement sent on the connections of one pool until its answer
 * arrives, so a statement stuck on a dead connection (a black-holed network, a paused server) or a
 * commit waiting for a synchronous standby that is gone shows up as a statement outstanding for
 * too long, rather than as silence. Insertion order makes the oldest the first entry: O(1) to ask.
 */
export class StatementWatch {
  #next = 0;
  readonly #open = new Map<number, { statement: string; startedAt: number }>();

  /** Records a statement sent; returns the handle `end` takes. */
  begin(config: unknown): number {
    const id = this.#next++;
    this.#open.set(id, { statement: statementName(config), startedAt: performance.now() });
    return id;
  }

  /** Records that the statement's answer (or error) arrived. */
  end(id: number): void {
    this.#open.delete(id);
  }

  /** The statement waiting longest, or null when none is outstanding. */
  oldest(): OutstandingStatement | null {
    for (const open of this.#open.values()) {
      return {
        statement: open.statement,
        outstandingMs: performance.now() - open.startedAt,
        outstanding: this.#open.size,
      };
    }
    return null;
  }
}

// A name for reports: never the SQL text itself (a caller's SQL may carry literals).
function statementName(config: unknown): string {
  if (typeof config === 'string') return NAMED.exec(config)?.[1] ?? 'query';
  const { name, text } = (config ?? {}) as { name?: unknown; text?: unknown };
  if (typeof name === 'string' && name !== '') return name;
  if (typeof text === 'string') return NAMED.exec(text)?.[1] ?? 'query';
  return 'query';
}
