import type { Queryable } from '../../storage/db.js';
import {
  type ClaimedRow,
  type ClaimOutcome,
  type ClaimParams,
  type ClaimShape,
  claimJobs,
  claimJobsAs,
  claimShapeOf,
} from '../../storage/leases/claim.js';
import { type QueueClaimSettingsRow, readClaimSettings } from '../../storage/queues/queues.js';
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
 * Claims for each queue with the statement its settings call for: the shape `claimShapeOf` chooses
 * (storage/leases/claim.ts) from a cached read of the queue's settings (the plain claim, or the claim
 * within a per-key limit, within a rate or concurrency limit, or in turns between fairness keys).
 * A stale cache cannot break a limit: each claim yields nothing for a queue not of its shape, and
 * a claim that may have met a change (`mayBeStale`) re-reads the settings at once and, when the
 * shape changed, claims again with the new one (so plain queues pay one primary-key read per empty
 * claim, none per full one). A worker whose cache predates fairness being turned on claims in
 * preference order until it re-reads.
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
    const shape = claimShapeOf(cached);
    const outcome = await this.#claimAs(shape, cached, params);
    if (!mayBeStale(shape, outcome)) return outcome.rows;
    const fresh = await this.#read(params.queue);
    const freshShape = claimShapeOf(fresh);
    if (sameShape(freshShape, shape)) return outcome.rows;
    return (await this.#claimAs(freshShape, fresh, params)).rows;
  }

  // A fair claim comes back short while work waits when a key had fewer jobs than its share or
  // its priority ran out: the worker is told to claim again (frontClaimDue) instead of going idle.
  // A throttled claim's verdict is kept for the runner (`throttled`).
  async #claimAs(
    shape: ClaimShape,
    settings: QueueClaimSettingsRow,
    params: ClaimParams,
  ): Promise<ClaimOutcome> {
    if (shape.candidates === 'preference' && shape.limit === 'none')
      return { rows: await this.#claimPlain(params, !settings.aging), verdict: null };
    const outcome = await claimJobsAs(this.db, this.schema, shape, {
      ...params,
      perKeyRate: settings.perKeyRate,
      recheckMs: CONCURRENCY_RECHECK_MS,
    });
    const { rows, verdict } = outcome;
    if (shape.candidates === 'turns' && rows.length > 0 && rows.length < params.limit)
      this.#fairShort.add(params.queue);
    if (verdict?.waitMs != null && verdict.throttledBy !== null)
      this.#throttles.set(params.queue, { waitMs: verdict.waitMs, by: verdict.throttledBy });
    return outcome;
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
  async #claimPlain(params: ClaimParams, useFloor: boolean): Promise<ClaimedRow[]> {
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

/**
 * Whether a claim's answer may come from settings changed since they were read: an empty plain or
 * round-robin claim (its gate yields nothing for a queue that is no longer of its kind), or a
 * throttled claim whose verdict says the queue has no limit (any more). A claim within a per-key
 * limit is not re-read for (its empty answer is common while keys are saturated): the cache's age
 * bounds it.
 */
function mayBeStale(shape: ClaimShape, outcome: ClaimOutcome): boolean {
  if (shape.limit === 'throttle') return outcome.verdict?.limited !== true;
  if (shape.limit === 'per-key' && shape.candidates === 'preference') return false;
  return outcome.rows.length === 0;
}

/** Two shapes are the same claim statement. */
function sameShape(a: ClaimShape, b: ClaimShape): boolean {
  return a.candidates === b.candidates && a.limit === b.limit;
}
