import { type ClaimedRow, claimJobs } from '../storage/claim.js';
import { claimJobsFair } from '../storage/claim-fair.js';
import { claimJobsLimited } from '../storage/claim-limited.js';
import { claimJobsThrottled, type ThrottleVerdict } from '../storage/claim-throttled.js';
import type { Queryable } from '../storage/db.js';
import { type QueueClaimSettingsRow, readClaimSettings } from '../storage/queues.js';
import { CLAIM_FLOOR_DEFAULTS, ClaimFloor, type ClaimFloorSettings } from './claim-floor.js';

/** How long a queue's cached limit is trusted before it is read again. */
const SETTINGS_TTL_MS = 5000;

/**
 * Longest wait a claim throttled by a concurrency limit is told: a slot frees whenever one of the
 * queue's jobs ends, in any process, and nothing announces that (this process's own endings wake
 * its runner at once).
 */
export const CONCURRENCY_RECHECK_MS = 100;

/** Why and how long a queue's last claim was held back by its limits. */
export interface Throttle {
  /** Until capacity is next free, in milliseconds of database time from the claim's answer. */
  waitMs: number;
  /** The limit that held the claim back. */
  by: 'rate' | 'concurrency';
}

type CachedSettings = QueueClaimSettingsRow & { readAt: number };

/**
 * Chooses the claim statement per queue: the plain claim, the limited one when the queue has a
 * per-key concurrency limit, the throttled one when it has a rate or concurrency limit, or the
 * round-robin one when it has fairness on, from a cached read of the queue's settings. (A worker
 * whose cache predates fairness being turned on claims in preference order until it re-reads.) A stale cache cannot break
 * the limit: the plain claim yields nothing for a limited queue, and an empty plain claim re-reads
 * the settings at once (so plain queues pay one primary-key read per empty claim, none per full one).
 * Plain claims start at the queue's ClaimFloor. A floored claim that comes back short returns what
 * it found, and the next claim starts at the front of the index (`frontClaimDue` tells the worker
 * to make it at once); one that finds nothing looks below the floor in a second statement, since
 * an empty claim would send the worker idle.
 */
export class ClaimRouter {
  readonly #limits = new Map<string, CachedSettings>();
  readonly #floors = new Map<string, ClaimFloor>();
  readonly #throttles = new Map<string, Throttle>();
  /** Round-robin queues whose last claim came back short but not empty: claim again at once. */
  readonly #fairShort = new Set<string>();

  constructor(
    private readonly db: Queryable,
    private readonly schema: string,
    // null: every claim starts at the front (lh.claim, whose callers expect strict preference order).
    private readonly floorSettings: ClaimFloorSettings | null = CLAIM_FLOOR_DEFAULTS,
  ) {}

  /** Claims with the statement the queue's settings call for. */
  async claim(params: {
    queue: string;
    owner: string;
    limit: number;
    leaseMs: number;
  }): Promise<ClaimedRow[]> {
    this.#throttles.delete(params.queue);
    this.#fairShort.delete(params.queue);
    let cached = this.#limits.get(params.queue);
    if (!cached || performance.now() - cached.readAt > SETTINGS_TTL_MS)
      cached = await this.#read(params.queue);
    if (cached.fair) {
      const rows = await this.#claimFair(params, cached.limit !== null);
      if (rows.length > 0) return rows;
      cached = await this.#read(params.queue); // fairness was turned off (or the queue paused)
      if (cached.fair) return rows;
    }
    if (cached.throttled) {
      const { rows, verdict } = await this.#claimThrottled(params, cached.perKeyRate);
      if (verdict.limited) return rows;
      cached = await this.#read(params.queue); // the limits were cleared (or the queue paused)
      if (cached.throttled) return rows;
    }
    if (cached.limit !== null) return claimJobsLimited(this.db, this.schema, params);
    const rows = await this.#claimPlain(params, !cached.aging);
    if (rows.length > 0) return rows;
    const fresh = await this.#read(params.queue);
    if (fresh.fair) return this.#claimFair(params, fresh.limit !== null);
    if (fresh.throttled) return (await this.#claimThrottled(params, fresh.perKeyRate)).rows;
    return fresh.limit === null ? rows : claimJobsLimited(this.db, this.schema, params);
  }

  // A fair claim comes back short while work waits when a key had fewer jobs than its share or
  // its priority ran out: the worker is told to claim again (frontClaimDue) instead of going idle.
  // With a per-key concurrency limit too, the limited claim takes the fair claim's candidates.
  async #claimFair(
    params: { queue: string; owner: string; limit: number; leaseMs: number },
    limited: boolean,
  ) {
    const rows = limited
      ? await claimJobsLimited(this.db, this.schema, { ...params, fair: true })
      : await claimJobsFair(this.db, this.schema, params);
    if (rows.length > 0 && rows.length < params.limit) this.#fairShort.add(params.queue);
    return rows;
  }

  async #claimThrottled(
    params: { queue: string; owner: string; limit: number; leaseMs: number },
    perKey: boolean,
  ): Promise<{ rows: ClaimedRow[]; verdict: ThrottleVerdict }> {
    const result = await claimJobsThrottled(this.db, this.schema, {
      ...params,
      perKey,
      recheckMs: CONCURRENCY_RECHECK_MS,
    });
    const { waitMs, throttledBy } = result.verdict;
    if (waitMs !== null && throttledBy !== null)
      this.#throttles.set(params.queue, { waitMs, by: throttledBy });
    return result;
  }

  /**
   * The queue's last claim was held back by its rate or concurrency limit: how long until capacity
   * is next free, and which limit it was. Null when the last claim was not held back.
   */
  throttled(queue: string): Throttle | null {
    return this.#throttles.get(queue) ?? null;
  }

  // Aging raises the priority of old jobs, whose available_at then lies below any floor: a queue
  // with aging on always claims from the front, so an aged job is claimed as soon as it is raised.
  async #claimPlain(
    params: { queue: string; owner: string; limit: number; leaseMs: number },
    useFloor: boolean,
  ): Promise<ClaimedRow[]> {
    if (!useFloor || this.floorSettings === null) return claimJobs(this.db, this.schema, params);
    let floors = this.#floors.get(params.queue);
    if (!floors) {
      floors = new ClaimFloor(this.floorSettings);
      this.#floors.set(params.queue, floors);
    }
    const floor = floors.next();
    const rows = await claimJobs(this.db, this.schema, { ...params, floor });
    floors.claimed(floor, rows, params.limit);
    if (floor === null || rows.length > 0) return rows;
    const older = await claimJobs(this.db, this.schema, { ...params, floor: null });
    floors.claimed(null, older, params.limit);
    return older;
  }

  /**
   * True when the queue's last claim came back short but more may be claimable, so the next claim
   * should be made now: it started at a floor (jobs may wait below it, and the next claim starts at
   * the front), or it was a round-robin claim (keys with less than their share, or a priority that
   * ran out).
   */
  frontClaimDue(queue: string): boolean {
    return this.#fairShort.has(queue) || (this.#floors.get(queue)?.frontDue() ?? false);
  }

  /** Forgets a queue's cached settings (after this process changed them). */
  forget(queue: string): void {
    this.#limits.delete(queue);
  }

  async #read(queue: string): Promise<CachedSettings> {
    const entry = { ...(await readClaimSettings(this.db, this.schema, queue)), readAt: performance.now() };
    this.#limits.set(queue, entry);
    return entry;
  }
}
