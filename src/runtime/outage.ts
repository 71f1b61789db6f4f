import { failureReason, isConnectionFailure, serverOf } from '../connection/failure.js';
import { toDatabaseError } from '../shared/errors.js';

/** The pool whose server is watched: its settings name the host, and `SELECT 1` probes it. */
export interface ProbedPool {
  readonly options?: unknown;
  query(text: string): Promise<unknown>;
}

/** Where `error` goes: the worker (a `logger` listens to it too). */
export interface ErrorEmitter {
  listenerCount(event: 'error'): number;
  emit(event: 'error', err: unknown): boolean;
}

/** How often a worker in an outage probes its database. */
const PROBE_INTERVAL_MS = 1000;

/**
 * Says once per outage that a worker lost its database, instead of once per statement per retry:
 * the first connection failure is emitted as `error` (or, when nobody listens and no logger is
 * set, a process warning `LEASEHOLD_DATABASE_UNREACHABLE`), later ones are dropped until a probe
 * finds the database answering again (then, unheard, `LEASEHOLD_DATABASE_BACK`). The worker's loops
 * keep retrying meanwhile, as they always did. Other errors (a statement refused) pass through.
 */
export class OutageReport {
  readonly #owner: string;
  readonly #pool: ProbedPool;
  readonly #emitter: ErrorEmitter;
  readonly #back: () => void;
  #probe: NodeJS.Timeout | null = null;
  #probing = false;
  #warned = false;

  /** `back` is called once the database answers again (the worker wakes its queues). */
  constructor(owner: string, pool: ProbedPool, emitter: ErrorEmitter, back: () => void) {
    this.#owner = owner;
    this.#pool = pool;
    this.#emitter = emitter;
    this.#back = back;
  }

  #listened(): boolean {
    return this.#emitter.listenerCount('error') > 0;
  }

  /** True while the database is thought unreachable. */
  get down(): boolean {
    return this.#probe !== null;
  }

  /** Reports `err`: every error that is not a connection failure, and the first of an outage. */
  report(err: unknown): void {
    if (!isConnectionFailure(err)) {
      if (this.#listened()) this.#emitter.emit('error', err);
      return;
    }
    if (this.down) return;
    this.#probe = setInterval(() => this.#check(), PROBE_INTERVAL_MS);
    this.#probe.unref();
    if (this.#listened()) {
      // Typed, whichever part heard it first: a raw driver error (the LISTEN connection's) becomes
      // a DatabaseError, as a statement's already is.
      this.#emitter.emit('error', toDatabaseError(err, 'database connection'));
      return;
    }
    this.#warned = true;
    process.emitWarning(
      `leasehold: worker ${this.#owner} cannot reach its database at ${serverOf(err, this.#pool)} ` +
        `(${failureReason(err)}); it keeps retrying and reports once the database answers again`,
      { type: 'LeaseholdWarning', code: 'LEASEHOLD_DATABASE_UNREACHABLE' },
    );
  }

  /** Stops probing (at `stop()`). */
  stop(): void {
    if (this.#probe) clearInterval(this.#probe);
    this.#probe = null;
    this.#warned = false;
  }

  async #check(): Promise<void> {
    if (this.#probing) return;
    this.#probing = true;
    try {
      await this.#pool.query('SELECT 1');
    } catch {
      // Still down: the next probe tries again, unless the pool was ended (the client closed).
      if ((this.#pool as { ending?: unknown }).ending === true) this.stop();
      return;
    } finally {
      this.#probing = false;
    }
    if (!this.down) return; // stopped meanwhile
    const warned = this.#warned;
    this.stop();
    if (warned && !this.#listened()) {
      process.emitWarning(
        `leasehold: worker ${this.#owner} reaches its database at ${serverOf(null, this.#pool)} again`,
        { type: 'LeaseholdWarning', code: 'LEASEHOLD_DATABASE_BACK' },
      );
    }
    this.#back();
  }
}
