/** What the unattended rule reads of a queue. */
export interface AttendanceFacts {
  paused: boolean;
  /** Age of the oldest claimable job; null when none. */
  oldestClaimableAgeMs: number | null;
  /** Running jobs whose lease has not expired. */
  liveLeases: number;
}

/**
 * True when claimable work has waited longer than `afterMs` while no job of the queue holds a live
 * lease and the queue is not paused: no worker has claimed from it lately. Derived from the jobs
 * table alone, so the claim path writes nothing for it. A worker whose shared `slots` are all
 * taken by its other queues' long jobs looks the same: the flag says "nobody is taking this work",
 * which is what an operator needs to know either way.
 */
export function isUnattended(facts: AttendanceFacts, afterMs: number): boolean {
  return (
    !facts.paused &&
    facts.liveLeases === 0 &&
    facts.oldestClaimableAgeMs !== null &&
    facts.oldestClaimableAgeMs > afterMs
  );
}
