import { Counter, Gauge, type Registry, register } from 'prom-client';
import { contextOf, type Leasehold } from '../client.js';
import type { LeaseholdContext } from '../context/context.js';
import type { CombinedEnqueueCounts } from '../context/enqueue-combiner.js';
import { type LeaseholdStats, readStats, type StatsOptions } from '../operations/queues/stats.js';
import type { ThrottleStats } from '../operations/queues/throttle-stats.js';

/** Options of `createStatsMetrics`. */
export interface StatsMetricsOptions {
  /** Registry to register in (default: prom-client's default `register`, the app's `/metrics`). */
  registry?: Registry;
  /** Options passed to `lh.stats()` on each scrape. */
  stats?: StatsOptions;
  /**
   * Called when a scrape could not read the stats (the scrape still answers, with
   * `leasehold_up 0` and no queue series). Default: none.
   */
  onError?: (err: unknown) => void;
}

/** How long one stats read serves the gauges of a scrape. */
const SHARE_MS = 1000;

/**
 * Registers the database-derived gauges of `lh.stats()` (pending, running, dead, ages, leases near
 * expiry, lost fences, recent transitions) in a prom-client registry. Each scrape reads the stats
 * once: a bounded, index-served snapshot, safe every few seconds at a 1M-job backlog. A scrape that
 * cannot read them answers `leasehold_up 0` (and no queue series) rather than failing. Takes a
 * client, or the resolved context of one (as the CLI's `leasehold metrics` does).
 */
export function createStatsMetrics(
  source: Leasehold | LeaseholdContext,
  options: StatsMetricsOptions = {},
): Registry {
  const { pool, schema, enqueues } = contextOf(source);
  const registry = options.registry ?? register;
  // A second call on the same registry replaces the first's series (one client's stats per
  // registry: give each client its own registry to export two), rather than throwing on the names.
  const registers = [replacingIn(registry)];
  let current: { readAt: number; stats: Promise<LeaseholdStats> } | null = null;
  // Every gauge's collect asks for the stats; the first one of a scrape reads them and the rest of
  // that scrape (within a second) share the answer, so a scrape costs one snapshot.
  const read = (): Promise<LeaseholdStats> => {
    if (!current || performance.now() - current.readAt > SHARE_MS) {
      const stats = readStats(pool, schema, options.stats ?? {});
      // Reported once per read, not once per gauge that shares it.
      stats.catch((err: unknown) => options.onError?.(err));
      current = { readAt: performance.now(), stats };
    }
    return current.stats;
  };
  // Every series below but leasehold_up is left out of a scrape whose read failed.
  const readOrNull = (): Promise<LeaseholdStats | null> => read().catch(() => null);
  const perQueue = (
    name: string,
    help: string,
    pick: (q: LeaseholdStats['queues'][number]) => number | null,
  ) =>
    new Gauge<'queue'>({
      name,
      help,
      labelNames: ['queue'],
      registers,
      async collect() {
        const stats = await readOrNull();
        this.reset();
        for (const q of stats?.queues ?? []) {
          const value = pick(q);
          if (value !== null) this.set({ queue: q.queue }, value);
        }
      },
    });
  perQueue('leasehold_queue_pending_jobs', 'Pending jobs (exact up to the count cap)', (q) => q.pending);
  perQueue('leasehold_queue_running_jobs', 'Running jobs', (q) => q.running);
  perQueue(
    'leasehold_queue_dead_jobs',
    'Dead jobs awaiting an operator (exact up to the count cap)',
    (q) => q.dead,
  );
  perQueue('leasehold_queue_count_capped', '1 when pending or dead reached the count cap', (q) =>
    q.capped ? 1 : 0,
  );
  perQueue(
    'leasehold_queue_oldest_claimable_age_seconds',
    'How long the oldest claimable job has waited (0 when none): alert on this',
    (q) => (q.oldestClaimableAgeMs ?? 0) / 1000,
  );
  perQueue(
    'leasehold_queue_oldest_dead_age_seconds',
    'How long ago the oldest unresolved dead job died (0 when none)',
    (q) => (q.oldestDeadAgeMs ?? 0) / 1000,
  );
  perQueue(
    'leasehold_queue_leases_expiring_soon',
    'Running jobs whose lease ends within the threshold',
    (q) => q.leasesExpiringSoon,
  );
  perQueue('leasehold_queue_paused', '1 when the queue is paused', (q) => (q.paused ? 1 : 0));
  perQueue(
    'leasehold_queue_completed_in_window',
    'Jobs completed within the stats window',
    (q) => q.completedInWindow,
  );
  perQueue(
    'leasehold_queue_throttled',
    "1 while the queue's rate or concurrency limit holds its claims back (absent without limits)",
    (q) => (q.throttle === null ? null : q.throttle.throttledForMs > 0 ? 1 : 0),
  );
  const throttleCounter = (name: string, help: string, pick: (t: ThrottleStats) => number) =>
    new Counter<'queue'>({
      name,
      help,
      labelNames: ['queue'],
      registers,
      async collect() {
        const stats = await readOrNull();
        this.reset();
        for (const q of stats?.queues ?? []) if (q.throttle) this.inc({ queue: q.queue }, pick(q.throttle));
      },
    });
  throttleCounter(
    'leasehold_queue_throttled_seconds_total',
    "Time the queue's claims were told to wait by its limits (kept by PostgreSQL, one interval per wait, not per worker)",
    (t) => t.throttledMs / 1000,
  );
  throttleCounter(
    'leasehold_queue_throttled_claims_total',
    "Claims the queue's rate or concurrency limit cut short while claimable jobs waited (kept by PostgreSQL)",
    (t) => t.throttledClaims,
  );
  new Gauge({
    name: 'leasehold_up',
    help: '1 when the last scrape read the queue statistics from the database, 0 when it could not',
    registers,
    async collect() {
      this.set((await readOrNull()) === null ? 0 : 1);
    },
  });
  new Counter<'queue' | 'operation'>({
    name: 'leasehold_lease_refusals_total',
    help: 'Lost-fence attempts counted in the database since the schema was created (kept by PostgreSQL)',
    labelNames: ['queue', 'operation'],
    registers,
    async collect() {
      const stats = await readOrNull();
      this.reset();
      for (const r of stats?.refusals ?? []) this.inc({ queue: r.queue, operation: r.operation }, r.count);
    },
  });
  // The same count as a gauge, under its first name: kept for dashboards and alerts written
  // against it (use leasehold_lease_refusals_total in new ones).
  new Gauge<'queue' | 'operation'>({
    name: 'leasehold_lease_refusals',
    help: 'Deprecated: the gauge form of leasehold_lease_refusals_total',
    labelNames: ['queue', 'operation'],
    registers,
    async collect() {
      const stats = await readOrNull();
      this.reset();
      for (const r of stats?.refusals ?? []) this.set({ queue: r.queue, operation: r.operation }, r.count);
    },
  });
  new Gauge<'queue' | 'kind' | 'error_code'>({
    name: 'leasehold_queue_transitions_in_window',
    help: 'Lease expirations, retries and deaths within the stats window, by error code',
    labelNames: ['queue', 'kind', 'error_code'],
    registers,
    async collect() {
      const stats = await readOrNull();
      this.reset();
      for (const t of stats?.transitions ?? []) {
        this.set({ queue: t.queue, kind: t.kind, error_code: t.errorCode || 'none' }, t.count);
      }
    },
  });
  new Gauge<'queue' | 'kind'>({
    name: 'leasehold_queue_steps_in_window',
    help: 'Durable steps (kind step) and sleeps (kind sleep) recorded within the stats window',
    labelNames: ['queue', 'kind'],
    registers,
    async collect() {
      const stats = await readOrNull();
      this.reset();
      for (const t of stats?.steps ?? []) this.set({ queue: t.queue, kind: t.kind }, t.count);
    },
  });
  new Gauge({
    name: 'leasehold_stats_window_seconds',
    help: 'Width of the window of the *_in_window gauges',
    registers,
    async collect() {
      const stats = await readOrNull();
      this.reset();
      if (stats) this.set(stats.windowMs / 1000);
    },
  });
  combiningCounters(registers, enqueues);
  return registry;
}

/** Write combining's counts of this client (absent with `combineEnqueues: false`): kept in memory. */
function combiningCounters(
  registers: ReturnType<typeof replacingIn>[],
  enqueues: LeaseholdContext['enqueues'],
): void {
  if (!enqueues) return;
  const counter = (name: string, help: string, pick: (c: CombinedEnqueueCounts) => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(pick(enqueues.counts()));
      },
    });
  counter(
    'leasehold_enqueue_statements_total',
    'Statements sent by enqueue() calls without client (combined or alone) by this client',
    (c) => c.statements,
  );
  counter(
    'leasehold_enqueue_combined_statements_total',
    "Of those, statements that carried more than one caller's row",
    (c) => c.combinedStatements,
  );
  counter(
    'leasehold_enqueue_statement_rows_total',
    'Rows those statements carried (rows per statement: divide by leasehold_enqueue_statements_total)',
    (c) => c.rows,
  );
}

/** `registry`, seen by a metric's constructor, with a metric of the same name removed first. */
function replacingIn(registry: Registry): Registry {
  return {
    contentType: registry.contentType,
    registerMetric(metric: Parameters<Registry['registerMetric']>[0]) {
      // prom-client's types leave out the metric's `name`, which every metric has.
      registry.removeSingleMetric((metric as unknown as { name: string }).name);
      registry.registerMetric(metric);
    },
  } as Registry;
}
