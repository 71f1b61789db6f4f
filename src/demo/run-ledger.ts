/** Duplicate runs found by the ledger. */
export interface DuplicateRuns {
  /** Jobs whose handler succeeded more than once. */
  jobs: number;
  /** Successful runs beyond the first, over all jobs. */
  extraRuns: number;
  /** Duplicated jobs that no disrupted worker ever ran: these no lost lease explains. */
  unexplained: number;
}

/**
 * Which worker's handler succeeded for which job, as the worker processes report it. A handler
 * succeeding twice for one job is what at-least-once delivery allows after a lost lease; the
 * ledger tells those apart from duplicates that no lost lease explains. Runs a killed worker had
 * not reported yet are missing, so its counts are lower bounds.
 */
export class RunLedger {
  readonly #runs = new Map<string, number[]>();

  /** Records successful handler runs of `worker`. */
  record(worker: number, jobIds: readonly string[]): void {
    for (const id of jobIds) {
      const workers = this.#runs.get(id);
      if (workers) workers.push(worker);
      else this.#runs.set(id, [worker]);
    }
  }

  /** Successful runs recorded for one worker. */
  runsBy(worker: number): number {
    let count = 0;
    for (const workers of this.#runs.values()) count += workers.filter((w) => w === worker).length;
    return count;
  }

  /** Counts duplicates; `disrupted` are the workers whose leases could lapse (killed or paused). */
  duplicates(disrupted: readonly number[]): DuplicateRuns {
    const result: DuplicateRuns = { jobs: 0, extraRuns: 0, unexplained: 0 };
    for (const workers of this.#runs.values()) {
      if (workers.length < 2) continue;
      result.jobs++;
      result.extraRuns += workers.length - 1;
      if (!workers.some((w) => disrupted.includes(w))) result.unexplained++;
    }
    return result;
  }
}
