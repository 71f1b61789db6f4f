import type { EventEmitter } from 'node:events';
import type pg from 'pg';
import { Counter, Gauge, Histogram, type Registry, register } from 'prom-client';
import type { AbortReason } from '../runtime/run/job-context.js';
import type { ClaimInfo, FlushInfo, OutcomeDetail } from '../runtime/telemetry-events.js';
import type { OutcomeResult, WorkerEventSource } from '../runtime/worker-events.js';
import { attemptLabel, BoundedLabels } from './labels.js';

/** Options of `createWorkerMetrics`. */
export interface WorkerMetricsOptions {
  /**
   * Registry to register in (default: prom-client's default `register`, the app's `/metrics`).
   * Several workers may share one registry.
   */
  registry?: Registry;
  /** The pool whose connections to report (default: none). Pass `lh.pool`. */
  pool?: pg.Pool;
}

/** Process-local metrics of one or more workers, in a prom-client registry. */
export interface WorkerMetrics {
  /** The registry holding the metrics: serve `registry.metrics()` as `/metrics`. */
  readonly registry: Registry;
  /** Stops listening to the worker (the metrics stay registered). */
  close(): void;
}

/** Seconds buckets for latencies: 5 ms to 10 minutes. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600];
/** Seconds buckets for statement durations: 0.5 ms to 5 s. */
const QUERY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];

/** Gets the metric already registered under `name`, or registers the one `make` builds. */
function shared<T>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

/**
 * Subscribes to a worker's events and records them as Prometheus metrics (see
 * docs/observability.md for the list). Labels are queue names, operations, outcomes, error codes
 * (bounded) and attempt numbers (bounded): never job ids or payloads.
 */
export function createWorkerMetrics(
  worker: WorkerEventSource,
  options: WorkerMetricsOptions = {},
): WorkerMetrics {
  const registry = options.registry ?? register;
  const codes = new BoundedLabels();
  const m = {
    claimLatency: shared(
      registry,
      'leasehold_claim_latency_seconds',
      () =>
        new Histogram<'queue'>({
          name: 'leasehold_claim_latency_seconds',
          help: 'Time from a job becoming claimable (enqueue, schedule or retry backoff) to its claim',
          labelNames: ['queue'],
          buckets: LATENCY_BUCKETS,
          registers: [registry],
        }),
    ),
    completionLatency: shared(
      registry,
      'leasehold_completion_latency_seconds',
      () =>
        new Histogram<'queue' | 'outcome'>({
          name: 'leasehold_completion_latency_seconds',
          help: 'Time from a job starting after its claim to its outcome being accepted or refused',
          labelNames: ['queue', 'outcome'],
          buckets: LATENCY_BUCKETS,
          registers: [registry],
        }),
    ),
    claimQuery: shared(
      registry,
      'leasehold_claim_query_duration_seconds',
      () =>
        new Histogram<'queue'>({
          name: 'leasehold_claim_query_duration_seconds',
          help: 'Duration of the claim statement, including waiting for a connection',
          labelNames: ['queue'],
          buckets: QUERY_BUCKETS,
          registers: [registry],
        }),
    ),
    flush: shared(
      registry,
      'leasehold_outcome_flush_duration_seconds',
      () =>
        new Histogram<'operation'>({
          name: 'leasehold_outcome_flush_duration_seconds',
          help: 'Duration of one batched outcome statement (complete, fail or snooze)',
          labelNames: ['operation'],
          buckets: QUERY_BUCKETS,
          registers: [registry],
        }),
    ),
    claimed: counter(registry, 'leasehold_jobs_claimed_total', 'Jobs claimed', ['queue']),
    completed: counter(registry, 'leasehold_jobs_completed_total', 'Jobs completed (throughput)', ['queue']),
    outcomes: counter(registry, 'leasehold_job_outcomes_total', 'Outcomes by result', ['queue', 'outcome']),
    retries: counter(registry, 'leasehold_job_retries_total', 'Failed attempts that will be retried', [
      'queue',
      'error_code',
      'attempt',
    ]),
    deaths: counter(registry, 'leasehold_jobs_dead_total', 'Jobs that went dead', ['queue', 'error_code']),
    lostFence: counter(
      registry,
      'leasehold_lost_fence_total',
      'Outcomes refused or not sent because the lease was no longer current',
      ['queue'],
    ),
    heartbeatFailures: counter(
      registry,
      'leasehold_heartbeat_failures_total',
      'Leases this worker lost or let lapse while the handler ran (extension refused or not answered in time)',
      ['queue', 'reason'],
    ),
    cancelledRuns: counter(
      registry,
      'leasehold_cancelled_runs_total',
      'Running jobs an operator or API cancel stopped (their handler saw CANCELLED, not a lost lease)',
      ['queue'],
    ),
    stuck: counter(
      registry,
      'leasehold_stuck_handlers_total',
      'Handlers still running after their signal was aborted',
      ['queue'],
    ),
    recovered: counter(registry, 'leasehold_recovered_leases_total', 'Expired leases moved by this process', [
      'result',
    ]),
    errors: counter(
      registry,
      'leasehold_worker_errors_total',
      'Internal errors (database unavailable, listener dropped)',
      [],
    ),
  };

  const busy = sampledGauge(registry, 'leasehold_worker_busy_slots', 'Handlers running now', ['owner']);
  const slots = sampledGauge(
    registry,
    'leasehold_worker_slots',
    'Handler slots in all (the sum of queue concurrency)',
    ['owner'],
  );
  const saturation = sampledGauge(
    registry,
    'leasehold_worker_saturation',
    'Busy slots over total slots (0..1)',
    ['owner'],
  );
  // Sampled at scrape time rather than on every change: cheaper, and exact when read.
  const sample = () => {
    const total = worker.slots;
    busy.set({ owner: worker.owner }, worker.activeCount);
    slots.set({ owner: worker.owner }, total);
    saturation.set({ owner: worker.owner }, total > 0 ? worker.activeCount / total : 0);
  };
  const samplers = samplersOf(registry);
  samplers.push(sample);
  if (options.pool) samplers.push(poolSampler(registry, options.pool, worker.owner));

  const onClaimed = (queue: string, info: ClaimInfo) => {
    m.claimQuery.observe({ queue }, info.durationMs / 1000);
    m.claimed.inc({ queue }, info.jobs);
    for (const wait of info.waitMs) m.claimLatency.observe({ queue }, Math.max(0, wait) / 1000);
  };
  const onFlushed = (info: FlushInfo) =>
    m.flush.observe({ operation: info.operation }, info.durationMs / 1000);
  const onOutcome = (
    job: { queue: string; attempt: number; startedAt: number },
    result: OutcomeResult,
    detail?: OutcomeDetail,
  ) => {
    const queue = job.queue;
    m.outcomes.inc({ queue, outcome: result });
    m.completionLatency.observe({ queue, outcome: result }, (performance.now() - job.startedAt) / 1000);
    if (result === 'completed') m.completed.inc({ queue });
    else if (result === 'retry') {
      m.retries.inc({
        queue,
        error_code: codes.label(detail?.errorCode),
        attempt: attemptLabel(job.attempt),
      });
    } else if (result === 'dead') m.deaths.inc({ queue, error_code: codes.label(detail?.errorCode) });
    else if (result === 'lost') m.lostFence.inc({ queue });
  };
  const onAborted = (job: { queue: string }, reason: AbortReason) => {
    if (reason === 'lease-lost' || reason === 'lease-deadline')
      m.heartbeatFailures.inc({ queue: job.queue, reason });
    else if (reason === 'cancelled') m.cancelledRuns.inc({ queue: job.queue });
  };
  const onStuck = (job: { queue: string }) => m.stuck.inc({ queue: job.queue });
  const onRecovered = (result: { retried: number; dead: number }) => {
    m.recovered.inc({ result: 'retried' }, result.retried);
    m.recovered.inc({ result: 'dead' }, result.dead);
  };
  const onError = () => m.errors.inc();

  const events = worker as unknown as EventEmitter;
  const listeners: [string, (...args: never[]) => void][] = [
    ['claimed', onClaimed],
    ['flushed', onFlushed],
    ['outcome', onOutcome],
    ['aborted', onAborted],
    ['stuck', onStuck],
    ['recovered', onRecovered],
    ['error', onError],
  ];
  for (const [name, listener] of listeners) events.on(name, listener as (...args: unknown[]) => void);
  return {
    registry,
    close() {
      for (const [name, listener] of listeners) events.off(name, listener as (...args: unknown[]) => void);
      const index = samplers.indexOf(sample);
      if (index >= 0) samplers.splice(index, 1);
    },
  };
}

function counter<T extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: T[],
): Counter<T> {
  return shared(registry, name, () => new Counter<T>({ name, help, labelNames, registers: [registry] }));
}

// Gauges of the current state are sampled when scraped (prom-client calls `collect` first), which is
// cheaper than tracking every change and exact when read. Every sampled gauge runs every sampler of
// its registry, so several workers sharing a registry are all sampled whichever gauge comes first.
const samplersByRegistry = new WeakMap<Registry, (() => void)[]>();

function samplersOf(registry: Registry): (() => void)[] {
  let list = samplersByRegistry.get(registry);
  if (!list) {
    list = [];
    samplersByRegistry.set(registry, list);
  }
  return list;
}

function sampledGauge<T extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: T[],
): Gauge<T> {
  return shared(
    registry,
    name,
    () =>
      new Gauge<T>({
        name,
        help,
        labelNames,
        registers: [registry],
        collect() {
          for (const sample of samplersOf(registry)) sample();
        },
      }),
  );
}

function poolSampler(registry: Registry, pool: pg.Pool, owner: string): () => void {
  const gauge = sampledGauge(
    registry,
    'leasehold_pool_connections',
    'Database pool connections: in_use, idle, and waiting (requests queued for a connection)',
    ['owner', 'state'],
  );
  return () => {
    gauge.set({ owner, state: 'in_use' }, pool.totalCount - pool.idleCount);
    gauge.set({ owner, state: 'idle' }, pool.idleCount);
    gauge.set({ owner, state: 'waiting' }, pool.waitingCount);
  };
}
