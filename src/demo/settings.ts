/** The demo's queues. */
export const DEMO_QUEUES = ['emails', 'thumbnails', 'webhooks'] as const;

/** A demo queue's name. */
export type DemoQueue = (typeof DEMO_QUEUES)[number];

/**
 * Timings and sizes of the demo, shared by the orchestrator and its worker processes. Leases are
 * short so that a killed or paused worker's jobs are recovered within seconds.
 */
export const DEMO_SETTINGS = {
  /** Jobs enqueued, spread evenly over the queues. */
  jobs: 3000,
  /** Lease of every queue, renewed while a handler runs (`renew: 'alive'`). */
  leaseMs: 1500,
  /** How long worker 3 stays stopped: twice its lease, so it surely lapses. */
  pauseMs: 3000,
  /** Share of jobs finished before worker 2 is killed. */
  killAt: 0.2,
  /** Share of jobs finished before worker 3 is paused. */
  pauseAt: 0.35,
  /** Jobs of each queue running at once in each worker. */
  concurrency: 6,
  /** Claim at least this often: retries wait out a backoff that no notification announces. */
  pollIntervalMs: 200,
  /** Recovery sweep interval of each worker. */
  recoveryIntervalMs: 500,
  /**
   * Outcomes are gathered for this long into one statement. It also means a worker usually holds
   * finished but unsent outcomes, which is what makes a paused worker's late writes visible: they
   * are sent after it resumes and refused by the fence.
   */
  outcomeBatchDelayMs: 50,
  /** Retries come back quickly, so the demo stays short. */
  backoff: { baseMs: 100, maxMs: 1000 },
  /** How long a worker's graceful stop may let running jobs finish. */
  shutdownTimeoutMs: 2000,
  /** How often a worker process reports its counters to the orchestrator. */
  statusIntervalMs: 100,
  /** Whole-demo deadline, embedded server start included. */
  timeoutMs: 90_000,
} as const;
