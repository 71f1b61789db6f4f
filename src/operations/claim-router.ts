import { type ClaimedRow, claimJobs } from '../storage/claim.js';
import { claimJobsLimited } from '../storage/claim-limited.js';
import type { Queryable } from '../storage/db.js';
import { readConcurrencyLimit } from '../storage/queues.js';

/** How long a queue's cached limit is trusted before it is read again. */
const SETTINGS_TTL_MS = 5000;

/**
 * Chooses the claim statement per queue: the plain claim, or the limited one when the queue has a
 * per-key concurrency limit, from a cached read of the queue's settings. A stale cache cannot break
 * the limit: the plain claim yields nothing for a limited queue, and an empty plain claim re-reads
 * the settings at once (so plain queues pay one primary-key read per empty claim, none per full one).
 */
export class ClaimRouter {
  readonly #limits = new Map<string, { limit: number | null; readAt: number }>();

  constructor(
    private readonly db: Queryable,
    private readonly schema: string,
  ) {}

  /** Claims with the statement the queue's settings call for. */
  async claim(params: {
    queue: string;
    owner: string;
    limit: number;
    leaseMs: number;
  }): Promise<ClaimedRow[]> {
    let cached = this.#limits.get(params.queue);
    if (!cached || performance.now() - cached.readAt > SETTINGS_TTL_MS)
      cached = await this.#read(params.queue);
    if (cached.limit !== null) return claimJobsLimited(this.db, this.schema, params);
    const rows = await claimJobs(this.db, this.schema, params);
    if (rows.length > 0) return rows;
    const fresh = await this.#read(params.queue);
    return fresh.limit === null ? rows : claimJobsLimited(this.db, this.schema, params);
  }

  /** Forgets a queue's cached settings (after this process changed them). */
  forget(queue: string): void {
    this.#limits.delete(queue);
  }

  async #read(queue: string): Promise<{ limit: number | null; readAt: number }> {
    const entry = {
      limit: await readConcurrencyLimit(this.db, this.schema, queue),
      readAt: performance.now(),
    };
    this.#limits.set(queue, entry);
    return entry;
  }
}
