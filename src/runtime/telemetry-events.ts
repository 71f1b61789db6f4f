/** What a worker reports about one claim statement (the `claimed` event). */
export interface ClaimInfo {
  /** Jobs the statement claimed (0 when the queue had none ready). */
  jobs: number;
  /** How long the statement took, waiting for a connection included, in ms. */
  durationMs: number;
  /** Per claimed job: how long it had been claimable (since enqueue, schedule or backoff) when claimed, in ms. */
  waitMs: number[];
  /**
   * Jobs the queue could hold claimed but unstarted after this claim: its fixed `prefetch`, or the
   * adaptive read-ahead when none is set.
   */
  readAhead: number;
  /**
   * The adaptive read-ahead's bound when the claim was sent (observed completions per second ×
   * lease × 1/4, see claim-sizer.ts); null with a fixed `prefetch` or shared `slots`.
   */
  readAheadBound: number | null;
}

/** What a worker reports about one batched outcome statement (the `flushed` event). */
export interface FlushInfo {
  operation: 'complete' | 'fail' | 'snooze';
  /** Outcomes the statement carried. */
  jobs: number;
  durationMs: number;
}

/** Extra facts of an outcome (the `outcome` event's third argument): never payload data. */
export interface OutcomeDetail {
  /** The failure's error code, for `retry` and `dead`. */
  errorCode?: string;
}
