export type { TaskItem } from './client.js';
export { Leasehold } from './client.js';
export { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_STATEMENT_TIMEOUT_MS } from './connection/leasehold-pool.js';
export type { HostAddress, TargetSessionAttrs } from './connection/settings.js';
export type { OutstandingStatement } from './connection/statement-watch.js';
export type {
  ClaimOptions,
  DedupeOptions,
  EnqueueItem,
  EnqueueManyResult,
  EnqueueOptions,
  EnqueueResult,
  FailOptions,
  LeaseholdOptions,
  PruneOptions,
} from './context/client-options.js';
export type { CombinedEnqueueCounts } from './context/enqueue-combiner.js';
export type {
  DashboardHandlerOptions,
  DashboardRequestHandler,
  DashboardRole,
} from './dashboard/handler-options.js';
export type { Dashboard, DashboardOptions } from './dashboard/server.js';
export type { EmbeddedPostgres, EmbeddedPostgresOptions } from './embedded.js';
export type { AgingResult } from './maintenance/aging.js';
export { DEFAULT_AGING_LIMIT, DEFAULT_AGING_PASS_INTERVAL_MS } from './maintenance/aging.js';
export type { LaneRotationResult } from './maintenance/lane-rotation.js';
export { DEFAULT_LANE_ROTATION_INTERVAL_MS } from './maintenance/lane-rotation.js';
export type { RecoveryResult } from './maintenance/recovery.js';
export type { PruneResult } from './maintenance/retention.js';
export { DEFAULT_PRUNE_INTERVAL_MS, DEFAULT_SUCCEEDED_RETENTION_MS } from './maintenance/retention.js';
export type { ScheduledJob, SchedulerResult } from './maintenance/scheduler.js';
export { DEFAULT_SCHEDULE_INTERVAL_MS, DEFAULT_SCHEDULE_LATE_AFTER_MS } from './maintenance/scheduler.js';
export type { MigrateResult } from './migrations/migrator.js';
export { dashboardHandler, startDashboard, startEmbeddedPostgres } from './on-demand.js';
export type { CancelOptions, CancelResult } from './operations/operator/cancel.js';
export type { DeadJobPage, DeadJobSummary, ListDeadOptions } from './operations/operator/dead.js';
export type { BlockedKey, BlockedKeysOptions, SkipOptions } from './operations/operator/ordering.js';
export type {
  ReplayFilter,
  ReplayOptions,
  ReplayProgress,
  ReplayResult,
} from './operations/operator/replay.js';
export type { SendEventInput, SendEventResult } from './operations/producer/events.js';
export { MAX_FLOW_BYTES, MAX_FLOW_EDGES, MAX_FLOW_NODES } from './operations/producer/flow-input.js';
export type {
  BlockedFlow,
  EnqueueFlowResult,
  FlowNode,
  FlowNodeStatus,
  FlowNodeView,
  FlowView,
  OnParentDead,
} from './operations/producer/flows.js';
export type {
  CatchUp,
  ScheduleEnqueueOptions,
  ScheduleInfo,
  ScheduleOptions,
} from './operations/producer/schedules.js';
export type { EnqueueAndWaitOptions, WaitForOptions, WaitForResult } from './operations/producer/wait-for.js';
export type { PauseOptions } from './operations/queues/queue-settings.js';
export type { QueueConfig, QueueSettings, QueueSummary } from './operations/queues/queues.js';
export type { RateLimit } from './operations/queues/rate-limits.js';
export type {
  LeaseholdStats,
  QueueStats,
  RefusalStat,
  StatsOptions,
  StepStat,
  TransitionStat,
} from './operations/queues/stats.js';
export type { ThrottleStats } from './operations/queues/throttle-stats.js';
export type { HealthFailure, HealthReport, HealthRules } from './operations/schema/health.js';
export type { RunUntilIdleOptions } from './operations/worker/run-until-idle.js';
export type { JobEvent, JobEventKind, JobWithHistory } from './records/job-history.js';
export type { Lease } from './records/lease.js';
export type {
  BatchHandler,
  BatchJobContext,
  BatchOptions,
} from './runtime/batch/batch-options.js';
export { MAX_BATCH_SIZE, MAX_BATCH_WAIT_MS } from './runtime/batch/batch-options.js';
export type { EffectSpec, ReconcileAnswer } from './runtime/durable/effects.js';
export { MAX_EFFECT_RESULT_BYTES } from './runtime/durable/effects.js';
export type { InvokeOptions } from './runtime/durable/invoke.js';
export {
  INVOKE_ERROR_CODES,
  InvokedJobCancelledError,
  InvokedJobDeadError,
} from './runtime/durable/invoke.js';
export type { EventWaitResult, WaitForEventOptions } from './runtime/durable/wait-event.js';
export type { IdleRunEnd, IdleRunLimits, IdleRunResult } from './runtime/idle-run.js';
export type {
  BatchQueueOptions,
  JobHandler,
  QueueHandler,
  QueueOptions,
  RenewPolicy,
  SingleQueueOptions,
  WorkerOptions,
  WorkerQueueSettings,
  WorkerTask,
} from './runtime/options.js';
export { WORKER_DEFAULTS } from './runtime/options.js';
export type { OutcomeResult } from './runtime/outcome-batcher.js';
export type {
  AbortReason,
  JobContext,
  JobInvoke,
  JobParent,
  JobTransaction,
} from './runtime/run/job-context.js';
export {
  PermanentError,
  RetryableError,
  SnoozeError,
  StepOrderError,
  UncertainEffectError,
} from './runtime/run/job-errors.js';
export { RESULT_ERROR_CODES } from './runtime/run/job-output.js';
export type { JobTransactionOptions, TransactionAdapter } from './runtime/run/job-transaction.js';
export type { LeaseLoss, LeaseLossReason } from './runtime/run/lease-loss.js';
export type {
  AnyTask,
  BatchTaskOptions,
  SingleTaskOptions,
  Task,
  TaskHandler,
  TaskOptions,
  TaskOutput,
  TaskPayload,
  TaskResult,
} from './runtime/task.js';
export { defineTask } from './runtime/task.js';
export type { ClaimInfo, FlushInfo, OutcomeDetail } from './runtime/telemetry-events.js';
export type { WorkerCounters, WorkerEventMap } from './runtime/worker.js';
export { Worker } from './runtime/worker.js';
export type { WorkerJob } from './runtime/worker-events.js';
export type { Logger, LogMethod } from './runtime/worker-logger.js';
export { logWorkerEvents } from './runtime/worker-logger.js';
export type { BackoffOptions } from './shared/config.js';
export { DEFAULT_BACKOFF, DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS } from './shared/config.js';
export { DEFAULT_STATS_OPTIONS } from './shared/defaults.js';
export type {
  DatabaseErrorDetails,
  JobErrorSummary,
  LeaseholdErrorByCode,
  LeaseholdErrorCode,
} from './shared/errors.js';
export {
  ClientClosedError,
  DatabaseError,
  EmbeddedPostgresError,
  isLeaseholdError,
  JobCancelledError,
  JobDeadError,
  JobNotFoundError,
  JobStateError,
  LeaseholdError,
  LeaseLostError,
  PermissionError,
  QueueNotFoundError,
  SchemaVersionError,
  ValidationError,
  WaitAbortedError,
  WaitTimeoutError,
} from './shared/errors.js';
export type { Queryable } from './storage/db.js';
export type { Job, JobStatus, RefusalCount } from './storage/jobs/read.js';
export type { FailOutcome } from './storage/leases/fail.js';
