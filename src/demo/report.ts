import type { RefusalCount, WorkerCounters } from '../index.js';
import type { DemoWorkerFate } from './demo-worker.js';
import type { QueueTally } from './job-tally.js';
import type { DuplicateRuns } from './run-ledger.js';
import { DEMO_SETTINGS } from './settings.js';

/** One worker process, as the report shows it. */
export interface WorkerSummary {
  number: number;
  fate: DemoWorkerFate;
  /** How long it was paused, in ms (0 if never). */
  pausedForMs: number;
  /** Last counters it reported (final ones if it stopped cleanly). */
  counters: WorkerCounters | null;
  /** Successful handler runs it reported. */
  runs: number;
  /** Why it failed, if it did. */
  failure: string | null;
}

/** What the demo found, read from the database and the workers' own counters. */
export interface DemoReport {
  schema: string;
  /** Jobs enqueued. */
  jobs: number;
  /** Final state of the jobs, per queue. */
  queues: QueueTally[];
  succeeded: number;
  dead: number;
  pending: number;
  running: number;
  /** Jobs the database no longer knows. */
  missing: number;
  /** Attempts beyond the first, over every job (sum of attemptCount - 1). */
  retries: number;
  /** Expired leases the recovery sweeps returned to pending (workers' `recovered` counters). */
  recovered: number;
  /** Late writes the database refused (`lh.leaseRefusals()`), per operation. */
  refusals: Record<string, number>;
  /** Every refused write together (heartbeats included). */
  refusedWrites: number;
  /**
   * Outcomes the workers dropped without sending, because their own lease deadline had passed:
   * their `lost` counters minus the refused completions and failures, which `lost` also counts.
   * (Refused snoozes are not outcomes here: the demo's handlers never snooze; a worker hands a
   * claimed job back with one when it could not start it in time, as after a pause.)
   */
  droppedLocally: number;
  duplicates: DuplicateRuns;
  /** From the workers' start to the last job finished. */
  elapsedMs: number;
  jobsPerSecond: number;
  workers: WorkerSummary[];
  /** Why the demo failed; empty when every job succeeded and nothing is unexplained. */
  problems: string[];
  ok: boolean;
}

/** The facts a report is built from. */
export interface ReportInput {
  schema: string;
  jobs: number;
  queues: QueueTally[];
  refusals: RefusalCount[];
  duplicates: DuplicateRuns;
  elapsedMs: number;
  workers: WorkerSummary[];
}

/** Builds the report and judges it: any job not succeeded, or any unexplained duplicate, fails it. */
export function buildReport(input: ReportInput): DemoReport {
  const sum = (pick: (q: QueueTally) => number) => input.queues.reduce((n, q) => n + pick(q), 0);
  const refusals: Record<string, number> = {};
  for (const r of input.refusals) refusals[r.operation] = (refusals[r.operation] ?? 0) + r.count;
  const refusedWrites = Object.values(refusals).reduce((n, count) => n + count, 0);
  const refusedOutcomes = (refusals.complete ?? 0) + (refusals.fail ?? 0);
  const counted = (pick: (c: WorkerCounters) => number) =>
    input.workers.reduce((n, w) => n + (w.counters ? pick(w.counters) : 0), 0);
  const report: DemoReport = {
    schema: input.schema,
    jobs: input.jobs,
    queues: input.queues,
    succeeded: sum((q) => q.succeeded),
    dead: sum((q) => q.dead),
    pending: sum((q) => q.pending),
    running: sum((q) => q.running),
    missing: sum((q) => q.missing),
    retries: sum((q) => q.retries),
    recovered: counted((c) => c.recovered),
    refusals,
    refusedWrites,
    droppedLocally: Math.max(0, counted((c) => c.lost) - refusedOutcomes),
    duplicates: input.duplicates,
    elapsedMs: Math.round(input.elapsedMs),
    jobsPerSecond: Math.round(input.jobs / Math.max(0.001, input.elapsedMs / 1000)),
    workers: input.workers,
    problems: [],
    ok: false,
  };
  if (report.succeeded !== input.jobs) {
    report.problems.push(
      `${count(input.jobs - report.succeeded, 'job')} did not succeed (dead ${report.dead}, pending ${report.pending}, running ${report.running}, missing ${report.missing})`,
    );
  }
  if (input.duplicates.unexplained > 0) {
    report.problems.push(`${input.duplicates.unexplained} jobs ran twice with no lost lease to explain it`);
  }
  for (const worker of input.workers) {
    if (worker.failure && worker.fate !== 'killed') report.problems.push(worker.failure);
  }
  report.ok = report.problems.length === 0;
  return report;
}

/** The report as the demo prints it. */
export function formatReport(report: DemoReport): string {
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const refusalDetail = Object.entries(report.refusals)
    .map(([operation, count]) => `${operation} ${count}`)
    .join(', ');
  const lines = [
    '',
    `Leasehold demo: ${report.jobs} jobs over ${report.queues.map((q) => q.queue).join(', ')}; 3 worker processes, ${seconds(DEMO_SETTINGS.leaseMs)} leases (schema ${report.schema})`,
    `  jobs        ${report.succeeded}/${report.jobs} succeeded (each read back by id), ${report.dead} dead, ${report.pending + report.running} unfinished, ${report.missing} missing`,
    `              ${report.queues.map((q) => `${q.queue} ${q.succeeded}/${q.total}`).join(' · ')}`,
    `  retries     ${report.retries} attempts beyond the first (planned failures, and runs lost with a lease)`,
    `  recovered   ${report.recovered} expired leases returned to pending by the workers' recovery sweeps`,
    `  fenced      ${count(report.refusedWrites, 'late write')} refused by the database${refusalDetail ? ` (${refusalDetail})` : ''}`,
    `  dropped     ${count(report.droppedLocally, 'outcome')} never sent: the worker saw its own lease deadline had passed`,
    `  late work   ${describeLateWork(report)}`,
    `  duplicates  ${describeDuplicates(report.duplicates)}`,
    `  throughput  ${report.jobsPerSecond} jobs/s (${report.jobs} jobs in ${seconds(report.elapsedMs)})`,
    ...report.workers.map(describeWorker),
    '',
    report.ok
      ? 'OK: every job succeeded; nothing was lost or stuck.'
      : `FAILED: ${report.problems.join('; ')}`,
  ];
  return `${lines.join('\n')}\n`;
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/**
 * What became of the paused worker's late outcomes, as the numbers say: refused by the fence in
 * the database, or never sent because the worker saw its own deadline had passed. Which of the two
 * happens depends on timing; the story follows the counts, never the other way round.
 */
export function describeLateWork(report: Pick<DemoReport, 'refusedWrites' | 'droppedLocally'>): string {
  const { refusedWrites: refused, droppedLocally: dropped } = report;
  if (refused === 0 && dropped === 0) return 'no late outcome was counted (none was in flight)';
  if (refused === 0) {
    return `none reached the database: the worker dropped ${count(dropped, 'outcome')} itself once it saw its lease deadlines had passed, so the fence had nothing to refuse`;
  }
  if (dropped === 0) return `every late write was sent and met the fence: ${count(refused, 'write')} refused`;
  return `${count(refused, 'late write')} refused by the fence; ${count(dropped, 'outcome')} dropped by the worker itself, seeing its deadline had passed`;
}

function describeDuplicates(duplicates: DuplicateRuns): string {
  if (duplicates.jobs === 0) return 'no job ran successfully twice';
  const explained =
    duplicates.unexplained === 0
      ? 'each after a lost lease (worker 2 or 3 had run it)'
      : `${duplicates.unexplained} of them with no lost lease to explain it`;
  return `${count(duplicates.jobs, 'job')} ran successfully twice, ${explained}`;
}

function describeWorker(worker: WorkerSummary): string {
  const c = worker.counters;
  const paused = worker.pausedForMs > 0 ? `paused ${(worker.pausedForMs / 1000).toFixed(1)} s, then ` : '';
  const fate = {
    running: `${paused}still running`,
    stopped: `${paused}ran to the end`,
    killed: 'killed (SIGKILL)',
    paused: 'still paused',
    crashed: 'crashed',
  }[worker.fate];
  if (!c) return `  worker ${worker.number}    ${fate}: reported nothing`;
  const atLeast = worker.fate === 'killed' ? '≥ ' : '';
  return `  worker ${worker.number}    ${fate}: completed ${atLeast}${c.completed}, retried ${c.retried}, lost ${c.lost}, recovered ${c.recovered}`;
}
