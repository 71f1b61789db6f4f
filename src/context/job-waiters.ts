import type pg from 'pg';
import type { ListenConnection } from '../connection/leasehold-pool.js';
import { WakeupListener } from '../runtime/listener.js';
import { isLeaseholdError } from '../shared/errors.js';
import { finishedChannel } from '../storage/finish-notices.js';
import { readWaitedJobs, type WaitState } from '../storage/jobs/wait.js';

/** The statuses a job ends in; any other (pending, running) is still live. */
const ENDED = new Set(['succeeded', 'dead', 'cancelled']);
/** Most ids one read of waited jobs carries. */
const READ_BATCH = 1000;
/** The LISTEN connection stays open this long after the last wait ends, for the next one. */
const LISTEN_LINGER_MS = 5000;

/** What the waiters of one client need: its pool and schema, and how (whether) to LISTEN. */
export interface JobWaitersSource {
  readonly pool: pg.Pool;
  readonly schema: string;
  /** LISTEN for finished jobs (false behind a transaction-mode pooler without a listen connection). */
  readonly listen: boolean;
  readonly listenVia: ListenConnection;
}

/** What a wait fails with when the client is closed before its job ended. */
export const WAITERS_CLOSED = Symbol('leasehold.waiters-closed');

/** A job's end as a waiter learns it: its state once succeeded, dead or cancelled; null when not found. */
export type JobEnd = WaitState | null;

interface Waiter {
  settle(end: JobEnd): void;
  fail(err: unknown): void;
}

/**
 * The jobs a client's `lh.waitFor` calls wait for, shared by all of them: one LISTEN connection
 * (opened at the first wait, closed a few seconds after the last) on the schema's finished
 * channel, one read per notification, and one poll per interval over every waited job, so a lost
 * notification only delays a waiter. A new wait flags its job (`notify_on_finish`) so that the
 * statement ending it notifies; a role without that privilege, or a client that does not LISTEN,
 * waits by polling alone. Reads are batched: waits started in the same tick share one statement.
 */
export class JobWaiters {
  readonly #waiters = new Map<string, Set<Waiter>>();
  // Ids to read on the next turn: with `mark`, new waits; without, a notification's or the poll's.
  readonly #toMark = new Set<string>();
  readonly #toRead = new Set<string>();
  #flushScheduled = false;
  #listener: WakeupListener | null = null;
  #lingerTimer: NodeJS.Timeout | null = null;
  #pollTimer: NodeJS.Timeout | null = null;
  #canMark = true;
  #closed = false;

  constructor(
    private readonly source: JobWaitersSource,
    private readonly pollIntervalMs: number,
  ) {}

  /** Whether the waiters LISTEN for finished jobs (for tests and diagnostics). */
  get listening(): boolean {
    return this.#listener !== null;
  }

  /** The LISTEN connection's server pid while connected; null otherwise. */
  get listenerPid(): number | null {
    return this.#listener?.backendPid ?? null;
  }

  /**
   * Waits for job `id` (validated) to end; `settle` gets its end, `fail` a read's error for a wait
   * that could not start, or WAITERS_CLOSED. Returns a function that stops this wait.
   */
  wait(id: string, settle: (end: JobEnd) => void, fail: (err: unknown) => void): () => void {
    if (this.#closed) {
      fail(WAITERS_CLOSED);
      return () => {};
    }
    const waiter: Waiter = { settle, fail };
    let set = this.#waiters.get(id);
    if (!set) {
      set = new Set();
      this.#waiters.set(id, set);
    }
    set.add(waiter);
    this.#started();
    this.#request(id, true);
    return () => this.#remove(id, waiter);
  }

  /** Stops listening and polling; the waits still open fail with WAITERS_CLOSED. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const set of [...this.#waiters.values()]) for (const waiter of [...set]) waiter.fail(WAITERS_CLOSED);
    this.#waiters.clear();
    this.#stopPolling();
    if (this.#lingerTimer) clearTimeout(this.#lingerTimer);
    this.#lingerTimer = null;
    const listener = this.#listener;
    this.#listener = null;
    await listener?.stop();
  }

  #started(): void {
    if (this.#lingerTimer) clearTimeout(this.#lingerTimer);
    this.#lingerTimer = null;
    if (this.source.listen && !this.#listener) {
      this.#listener = new WakeupListener({
        connection: this.source.listenVia,
        channel: finishedChannel(this.source.schema),
        onWake: (payload) => {
          for (const id of payload.split(',')) if (this.#waiters.has(id)) this.#request(id, false);
        },
        // Notifications sent while not connected are lost: read every waited job again.
        onConnected: () => {
          for (const id of this.#waiters.keys()) this.#request(id, false);
        },
        onError: () => {}, // reconnects by itself; the poll covers the gap
      });
      this.#listener.start();
    }
    // Ref'd on purpose: a pending wait keeps the process alive, as any pending request does.
    this.#pollTimer ??= setInterval(() => {
      for (const id of this.#waiters.keys()) this.#request(id, false);
    }, this.pollIntervalMs);
  }

  #remove(id: string, waiter: Waiter): void {
    const set = this.#waiters.get(id);
    if (!set?.delete(waiter)) return;
    if (set.size === 0) this.#waiters.delete(id);
    if (this.#waiters.size > 0) return;
    this.#stopPolling();
    const listener = this.#listener;
    if (!listener || this.#lingerTimer) return;
    this.#lingerTimer = setTimeout(() => {
      this.#lingerTimer = null;
      if (this.#waiters.size > 0 || this.#listener !== listener) return;
      this.#listener = null;
      void listener.stop();
    }, LISTEN_LINGER_MS);
    this.#lingerTimer.unref();
  }

  #stopPolling(): void {
    if (this.#pollTimer) clearInterval(this.#pollTimer);
    this.#pollTimer = null;
  }

  #request(id: string, mark: boolean): void {
    (mark && this.#listener && this.#canMark ? this.#toMark : this.#toRead).add(id);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => {
      this.#flushScheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    const marking = [...this.#toMark];
    const reading = [...this.#toRead].filter((id) => !this.#toMark.has(id));
    this.#toMark.clear();
    this.#toRead.clear();
    for (let i = 0; i < marking.length; i += READ_BATCH)
      await this.#read(marking.slice(i, i + READ_BATCH), true);
    for (let i = 0; i < reading.length; i += READ_BATCH)
      await this.#read(reading.slice(i, i + READ_BATCH), false);
  }

  async #read(ids: string[], mark: boolean): Promise<void> {
    let states: WaitState[];
    try {
      states = await readWaitedJobs(this.source.pool, this.source.schema, ids, mark);
    } catch (err) {
      if (mark && isLeaseholdError(err, 'PERMISSION_DENIED')) {
        // This role may not flag jobs: wait by polling alone.
        this.#canMark = false;
        return this.#read(ids, false);
      }
      // A new wait fails at once (no such schema, no connection...); a poll tries again next time.
      if (mark) for (const id of ids) for (const waiter of this.#waiters.get(id) ?? []) waiter.fail(err);
      return;
    }
    const found = new Map(states.map((state) => [state.id, state]));
    for (const id of ids) {
      const state = found.get(id);
      if (state && !ENDED.has(state.status)) {
        // Flagging found the job ended meanwhile (or not flagged at all): read it again now.
        if (mark && !state.marked) this.#request(id, false);
        continue;
      }
      const end: JobEnd = state ?? null;
      for (const waiter of this.#waiters.get(id) ?? []) waiter.settle(end);
    }
  }
}
