import type pg from 'pg';
import type { OutstandingStatement, StatementWatch } from '../../connection/statement-watch.js';
import { ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/validation.js';
import { readJobsTuples, readOldestTransaction } from '../../storage/operator/health.js';
import { readStats } from '../queues/stats.js';

export type { OutstandingStatement } from '../../connection/statement-watch.js';

/** Thresholds of `checkHealth`; a rule runs only when its threshold is given. */
export interface HealthRules {
  /** Fails when a queue's oldest claimable job has waited longer than this (ms): old work. */
  maxOldestAgeMs?: number;
  /** Fails when a queue holds more dead jobs than this. */
  maxDead?: number;
  /** Fails when a queue's oldest unresolved dead job died longer ago than this (ms). */
  maxOldestDeadAgeMs?: number;
  /** Fails when a queue has more running jobs whose lease ends within 30 s than this. */
  maxLeasesExpiringSoon?: number;
  /** Fails when a transaction in this database has been open longer than this (ms), holding back cleanup. */
  maxOldTransactionMs?: number;
  /** Fails when dead tuples exceed this share (0..1) of the jobs table's tuples: bloat, a slow claim. */
  maxDeadTupleRatio?: number;
  /**
   * Fails when a statement of this client has waited longer than this (ms) for its answer: a dead
   * connection, a paused server, a commit waiting for a lost synchronous standby. Checked without
   * the database, and first, so it answers while the database does not (set it alone for that).
   * Only for the pool Leasehold creates. A lease length is the natural limit.
   */
  maxStatementOutstandingMs?: number;
  /** Only these queues (default: every queue). */
  queues?: readonly string[];
}

/** One failed rule. */
export interface HealthFailure {
  /** The rule's option name, e.g. `maxOldestAgeMs`. */
  rule: keyof HealthRules;
  /** One line saying what is wrong and where. */
  message: string;
}

/** The answer of `checkHealth`. */
export interface HealthReport {
  ok: boolean;
  failures: HealthFailure[];
}

const NUMERIC_RULES = [
  'maxOldestAgeMs',
  'maxDead',
  'maxOldestDeadAgeMs',
  'maxLeasesExpiringSoon',
  'maxOldTransactionMs',
  'maxDeadTupleRatio',
  'maxStatementOutstandingMs',
] as const;

/**
 * Checks the given rules against the database (queue gauges, old transactions, table bloat) and
 * against the client's own oldest outstanding statement (`oldestStatement`, read before any query).
 */
export async function checkHealth(
  pool: pg.Pool,
  schema: string,
  rules: HealthRules = {},
  oldestStatement: () => OutstandingStatement | null = () => null,
): Promise<HealthReport> {
  if (typeof rules !== 'object' || rules === null) throw new ValidationError('rules', 'must be an object');
  rejectUnknownOptions(rules, [...NUMERIC_RULES, 'queues'], 'rules');
  for (const name of NUMERIC_RULES) {
    const value = rules[name];
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value < 0)) {
      throw new ValidationError(name, 'must be a number of at least 0');
    }
  }
  const failures: HealthFailure[] = [];
  if (rules.maxStatementOutstandingMs !== undefined) {
    const stuck = oldestStatement();
    if (stuck && stuck.outstandingMs > rules.maxStatementOutstandingMs) {
      failures.push({
        rule: 'maxStatementOutstandingMs',
        message: `statement ${stuck.statement} has waited ${formatMs(stuck.outstandingMs)} for an answer (${stuck.outstanding} outstanding; limit ${formatMs(rules.maxStatementOutstandingMs)}): a dead connection, a paused server or a commit waiting for a lost synchronous standby`,
      });
    }
  }
  const wantsQueues =
    rules.maxOldestAgeMs !== undefined ||
    rules.maxDead !== undefined ||
    rules.maxOldestDeadAgeMs !== undefined ||
    rules.maxLeasesExpiringSoon !== undefined;
  if (wantsQueues) {
    const only = rules.queues ? new Set(rules.queues) : null;
    const stats = await readStats(pool, schema, { countCap: Math.max(10_000, (rules.maxDead ?? 0) + 1) });
    for (const q of stats.queues) {
      if (only && !only.has(q.queue)) continue;
      const age = q.oldestClaimableAgeMs;
      if (rules.maxOldestAgeMs !== undefined && age !== null && age > rules.maxOldestAgeMs) {
        failures.push({
          rule: 'maxOldestAgeMs',
          message: `queue ${q.queue}: oldest claimable job has waited ${formatMs(age)} (limit ${formatMs(rules.maxOldestAgeMs)})`,
        });
      }
      if (rules.maxDead !== undefined && q.dead > rules.maxDead) {
        failures.push({
          rule: 'maxDead',
          message: `queue ${q.queue}: ${q.dead}${q.capped ? '+' : ''} dead jobs (limit ${rules.maxDead})`,
        });
      }
      const deadAge = q.oldestDeadAgeMs;
      if (rules.maxOldestDeadAgeMs !== undefined && deadAge !== null && deadAge > rules.maxOldestDeadAgeMs) {
        failures.push({
          rule: 'maxOldestDeadAgeMs',
          message: `queue ${q.queue}: oldest dead job died ${formatMs(deadAge)} ago (limit ${formatMs(rules.maxOldestDeadAgeMs)})`,
        });
      }
      if (rules.maxLeasesExpiringSoon !== undefined && q.leasesExpiringSoon > rules.maxLeasesExpiringSoon) {
        failures.push({
          rule: 'maxLeasesExpiringSoon',
          message: `queue ${q.queue}: ${q.leasesExpiringSoon} leases expire within 30 s (limit ${rules.maxLeasesExpiringSoon})`,
        });
      }
    }
  }
  if (rules.maxOldTransactionMs !== undefined) {
    const oldest = await readOldestTransaction(pool, schema);
    if (oldest && oldest.age_ms > rules.maxOldTransactionMs) {
      const who = oldest.application_name ? ` (${oldest.application_name})` : '';
      failures.push({
        rule: 'maxOldTransactionMs',
        message: `a transaction has been open ${formatMs(oldest.age_ms)} (pid ${oldest.pid}${who}, ${oldest.state}), holding back cleanup (limit ${formatMs(rules.maxOldTransactionMs)})`,
      });
    }
  }
  if (rules.maxDeadTupleRatio !== undefined) {
    const tuples = await readJobsTuples(pool, schema);
    const total = tuples ? tuples.live + tuples.dead : 0;
    const ratio = tuples && total > 0 ? tuples.dead / total : 0;
    if (tuples && ratio > rules.maxDeadTupleRatio) {
      failures.push({
        rule: 'maxDeadTupleRatio',
        message: `jobs table: ${Math.round(ratio * 100)}% dead tuples (${tuples.dead} of ${total}; limit ${Math.round(rules.maxDeadTupleRatio * 100)}%)`,
      });
    }
  }
  return { ok: failures.length === 0, failures };
}

/**
 * A duration for people: 950ms, 42s, 5m 3s, 2h 10m, 2d 4h. The one format of health messages and
 * of the CLI's tables (`leasehold check` and `leasehold queues` print an age the same way).
 */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  const h = Math.floor(s / 3600);
  if (h < 24) return `${h}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/**
 * The statement waiting longest for its answer on the pool Leasehold created, or null (none
 * outstanding, or a pool of the caller's). Answers without the database: a statement stuck on a
 * dead connection or a commit waiting for a lost synchronous standby shows here while nothing else
 * does.
 */
export function oldestStatement(context: { statements: StatementWatch | null }): OutstandingStatement | null {
  return context.statements?.oldest() ?? null;
}
