/**
 * `leasehold/prometheus`: Prometheus collectors over prom-client, an optional peer dependency
 * (`npm install prom-client`). They register into the application's own registry: prom-client's
 * default `register` unless a `registry` is given, so the app's `/metrics` shows them. Importing
 * `leasehold` never loads this module; without it, `lh.stats()`, `worker.counters` and the
 * worker's events give the same figures as plain values.
 */
export type { StatsMetricsOptions } from './observability/stats-metrics.js';
export { createStatsMetrics } from './observability/stats-metrics.js';
export type { WorkerMetrics, WorkerMetricsOptions } from './observability/worker-metrics.js';
export { createWorkerMetrics } from './observability/worker-metrics.js';
