// The ledger as a worker process writes it: rows of one table gathered into one multi-row insert
// per flush (the next flush starts when the previous one answered), on a pool of its own.
// `write` resolves once the row is committed, or rejects if that flush failed (a handler's start
// record: the handler must not run without it). `append` keeps retrying until the row is
// committed (end records and acknowledgements, which may be late but must not be lost unless the
// process itself dies). `drain` waits for everything appended so far.
import pg from 'pg';
import { ledgerInsert } from './schema.mjs';

const MAX_ROWS_PER_INSERT = 500;

/** A batching, retrying writer of the harness ledger. */
export class LedgerWriter {
  #pool;
  #queues = new Map(); // table -> [{ row, resolve, reject, retry }]
  #flushing = new Map(); // table -> Promise
  #idle = [];
  #prefix;
  #seq = 0;

  constructor(connectionString, applicationName) {
    this.#prefix = `${applicationName}:${process.pid}:`;
    this.#pool = new pg.Pool({ connectionString, max: 3, application_name: applicationName });
    this.#pool.on('error', () => {}); // a server restart drops idle clients; queries report it
  }

  /** Inserts a row; resolves when it is committed, rejects if the insert failed. */
  write(table, row) {
    return new Promise((resolve, reject) =>
      this.#enqueue(table, { row: [this.#nextSeq(), ...row], resolve, reject, retry: false }),
    );
  }

  /** Inserts a row eventually, retrying through outages. */
  append(table, row) {
    this.#enqueue(table, {
      row: [this.#nextSeq(), ...row],
      resolve: () => {},
      reject: () => {},
      retry: true,
    });
  }

  #nextSeq() {
    return `${this.#prefix}${++this.#seq}`;
  }

  /**
   * Calls the fake downstream: logs the call and applies its effect once per key, as a real one
   * deduplicating by idempotency key would (so a key two jobs share silently drops the second's).
   * `jobRef` is the producer's reference of the calling job (payload.ref).
   */
  async callDownstream(key, jobId, token, owner, kind, claimId = null, jobRef = null) {
    await this.#pool.query(
      `WITH call AS (
         INSERT INTO chaos.downstream_calls (key, job_id, token, owner, kind, claim_id, job_ref)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING key
       )
       INSERT INTO chaos.downstream_applied (key, job_id) SELECT key, $2 FROM call ON CONFLICT (key) DO NOTHING`,
      [key, jobId, token, owner, kind, claimId, jobRef],
    );
  }

  /** A step's side effect (the steps workload): one row per run of it, committed before it returns. */
  async stepEffect(jobId, step, token, claimId, owner, value) {
    await this.#pool.query(
      'INSERT INTO chaos.step_effects (job_id, step, token, claim_id, owner, value) VALUES ($1, $2, $3, $4, $5, $6)',
      [jobId, step, token, claimId, owner, value],
    );
  }

  /** Whether the downstream applied the effect of `key` (for reconciling an uncertain effect). */
  async downstreamApplied(key) {
    const { rows } = await this.#pool.query('SELECT 1 FROM chaos.downstream_applied WHERE key = $1', [key]);
    return rows.length > 0;
  }

  /** Resolves once every row queued so far is committed (or given up on with `write`). */
  drain() {
    if (this.#pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Ends the pool. */
  close() {
    return this.#pool.end();
  }

  get #pending() {
    let count = this.#flushing.size;
    for (const list of this.#queues.values()) count += list.length;
    return count;
  }

  #enqueue(table, entry) {
    let list = this.#queues.get(table);
    if (!list) {
      list = [];
      this.#queues.set(table, list);
    }
    list.push(entry);
    if (!this.#flushing.has(table)) this.#startFlush(table, 0);
  }

  #startFlush(table, failures) {
    const flush = (async () => {
      await new Promise((resolve) => setImmediate(resolve));
      const list = this.#queues.get(table) ?? [];
      const batch = list.splice(0, MAX_ROWS_PER_INSERT);
      if (batch.length === 0) return 0;
      try {
        const query = ledgerInsert(
          table,
          batch.map((entry) => entry.row),
        );
        await this.#pool.query(query);
        for (const entry of batch) entry.resolve();
        return 0;
      } catch (err) {
        const retried = batch.filter((entry) => entry.retry);
        for (const entry of batch) if (!entry.retry) entry.reject(err);
        list.unshift(...retried);
        await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 50 * 2 ** failures)));
        return failures + 1;
      }
    })();
    this.#flushing.set(table, flush);
    flush.then((nextFailures) => {
      this.#flushing.delete(table);
      if ((this.#queues.get(table)?.length ?? 0) > 0) this.#startFlush(table, nextFailures);
      else if (this.#pending === 0) for (const resolve of this.#idle.splice(0)) resolve();
    });
  }
}
