/** How a ClaimFloor trails the queue. */
export interface ClaimFloorSettings {
  /** How far below the oldest claimed available_at the next claim starts. */
  lagMs: number;
  /** The longest claims may go on starting at a floor before one starts at the front. */
  fullScanEveryMs: number;
}

/** One second of lag; a claim from the front at least every 30 seconds. */
export const CLAIM_FLOOR_DEFAULTS: ClaimFloorSettings = { lagMs: 1000, fullScanEveryMs: 30_000 };

/**
 * Where a worker's claims of one queue may start walking jobs_claimable_idx.
 *
 * Why: every claimed job leaves its `pending` entry behind in jobs_claimable_idx until vacuum
 * removes it, and vacuum can remove nothing newer than the oldest open snapshot. While one
 * transaction pins that horizon, the entries of every job claimed since pile up at the front of
 * the index (the oldest available_at), and a claim that starts at the front visits each of them
 * in the heap before it reaches live work: throughput fell to 0.15x within two minutes. A claim
 * that starts at a floor on available_at skips them inside the index, without heap visits.
 *
 * The floor is a little below the oldest available_at the last claim returned, so it trails the
 * live head of the queue. A pending job can lie below it only if it became claimable late: a
 * transaction that committed its enqueue long after its now(), a retry written by a statement
 * that started before the last claim, a job aged into a higher priority, a `runAt` in the past.
 * None of them is lost: whenever a floored claim comes back short, the next claim starts at the
 * front of the index (the worker makes it at once: see `frontDue`), and every `fullScanEveryMs`
 * one claim starts at the front anyway. So a straggler waits at most that long, and only while the
 * queue has a backlog to fill full batches. The short claim's own jobs start before that look
 * below the floor: on a nearly idle queue, a wake-up costs one statement before its handler runs.
 * Database time throughout: the floor is computed from available_at values the database returned.
 */
export class ClaimFloor {
  #floor: Date | null = null;
  #lastFullScanAt = Number.NEGATIVE_INFINITY;
  #frontDue = false;

  constructor(private readonly settings: ClaimFloorSettings = CLAIM_FLOOR_DEFAULTS) {}

  /** The floor for the next claim; null when it must start at the front of the index. */
  next(nowMs: number = performance.now()): Date | null {
    if (
      this.#frontDue ||
      this.#floor === null ||
      nowMs - this.#lastFullScanAt >= this.settings.fullScanEveryMs
    )
      return null;
    return this.#floor;
  }

  /** True after a floored claim came back short: the next claim looks below the floor. */
  frontDue(): boolean {
    return this.#frontDue;
  }

  /**
   * Records a claim's result: `floor` is what it was given (null: it started at the front), `limit`
   * what it asked for.
   */
  claimed(
    floor: Date | null,
    rows: readonly { available_ms: number }[],
    limit: number,
    nowMs: number = performance.now(),
  ): void {
    if (floor === null) {
      this.#lastFullScanAt = nowMs;
      this.#frontDue = false;
    } else if (rows.length < limit) {
      this.#frontDue = true;
    }
    if (rows.length === 0) {
      // Nothing claimable from the front: no floor is known. From a floor: keep it (the next
      // claim starts at the front and records its own result).
      if (floor === null) this.#floor = null;
      return;
    }
    let oldest = Number.POSITIVE_INFINITY;
    for (const row of rows) oldest = Math.min(oldest, row.available_ms);
    this.#floor = new Date(oldest - this.settings.lagMs);
  }
}
