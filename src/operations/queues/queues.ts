import { DEFAULT_UNATTENDED_AFTER_MS } from '../../shared/defaults.js';
import { isLeaseholdError, ValidationError } from '../../shared/errors.js';
import {
  assertInt,
  assertQueueName,
  assertText,
  optionalInt,
  optionsObject,
  rejectUnknownOptions,
} from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import {
  configureQueue as configureQueueRow,
  FAIRNESS_ALONE_CONSTRAINT,
  listQueues,
  ONE_LIMITED_CLAIM_CONSTRAINT,
  type QueueChanges,
  type QueueRow,
} from '../../storage/queues/queues.js';
import { parseConcurrencyLimit, parseRateLimit, type RateLimit } from './rate-limits.js';
import { isUnattended } from './unattended.js';

/** Settings `configureQueue` changes; a setting left out is kept, `null` clears it to its default. */
export interface QueueConfig {
  /** Who answers for this queue's dead jobs (up to 200 characters). */
  owner?: string | null;
  /** Dead and cancelled jobs are removed this long after they ended; null (default) keeps them. */
  deadRetentionMs?: number | null;
  /** Succeeded jobs are removed this long after they finished; null: the client's default. */
  succeededRetentionMs?: number | null;
  /** A paused queue's jobs are not claimed; running ones finish. */
  paused?: boolean;
  /** At most this many jobs of one `concurrencyKey` run at once, across all workers; null: no limit. */
  concurrencyLimitPerKey?: number | null;
  /** Aging: a pending job's priority rises one step per interval waited (ms); null: no aging. */
  agingIntervalMs?: number | null;
  /** Aging: the most steps a job's priority rises (default 10 when aging is on). */
  agingMaxBoost?: number | null;
  /** At most `max` jobs start in any `perMs` window, across all workers (per key with `perKey`); null: no limit. */
  rateLimit?: RateLimit | null;
  /** At most this many of the queue's jobs hold a live lease at once, across all workers; null: no limit. */
  concurrencyLimit?: number | null;
  /**
   * `'round-robin'`: claims take turns between the jobs' `fairnessKey`s, within a priority; null
   * (the default) turns it off: claims in preference order. Composes with `concurrencyLimitPerKey`;
   * not combined with `rateLimit` or `concurrencyLimit` (yet).
   */
  fairness?: 'round-robin' | null;
}

/** A queue's stored settings. */
export interface QueueSettings {
  name: string;
  owner: string | null;
  deadRetentionMs: number | null;
  succeededRetentionMs: number | null;
  paused: boolean;
  updatedAt: Date;
  concurrencyLimitPerKey: number | null;
  agingIntervalMs: number | null;
  agingMaxBoost: number | null;
  /** The queue's rate limit, or null. */
  rateLimit: Required<RateLimit> | null;
  /** The queue's global concurrency limit, or null. */
  concurrencyLimit: number | null;
  /** `'round-robin'` when claims take turns between fairness keys, else null. */
  fairness: 'round-robin' | null;
}

/** One queue at a glance. */
export interface QueueSummary {
  name: string;
  pending: number;
  running: number;
  dead: number;
  cancelled: number;
  /** How long the oldest claimable job has waited since it became claimable; null when none. */
  oldestClaimableAgeMs: number | null;
  owner: string | null;
  paused: boolean;
  /**
   * Claimable work has waited longer than `unattendedAfterMs` (default 60 s) and none of the
   * queue's jobs holds a live lease: no worker is taking it (none runs, or none serves this queue).
   */
  unattended: boolean;
  deadRetentionMs: number | null;
  succeededRetentionMs: number | null;
}

/** Longest retention accepted: ten years. */
const MAX_RETENTION_MS = 10 * 365 * 86_400_000;

/** The keys `lh.configureQueue` takes (docs/api.md lists each: test/interfaces/docs-options.test.ts). */
export const CONFIGURE_QUEUE_KEYS = [
  'owner',
  'deadRetentionMs',
  'succeededRetentionMs',
  'paused',
  'concurrencyLimitPerKey',
  'agingIntervalMs',
  'agingMaxBoost',
  'rateLimit',
  'concurrencyLimit',
  'fairness',
] as const;

/** Validates and stores a queue's settings. */
export async function configureQueue(
  db: Queryable,
  schema: string,
  queue: string,
  config: QueueConfig,
): Promise<QueueSettings> {
  assertQueueName(queue);
  if (typeof config !== 'object' || config === null) throw new ValidationError('config', 'must be an object');
  rejectUnknownOptions(config, CONFIGURE_QUEUE_KEYS, 'config');
  const changes: QueueChanges = {};
  if (config.owner !== undefined) {
    changes.owner = config.owner === null ? null : assertText(config.owner, 'config.owner', 200);
  }
  for (const key of ['deadRetentionMs', 'succeededRetentionMs'] as const) {
    const value = config[key];
    if (value !== undefined) {
      changes[key] = value === null ? null : assertInt(value, `config.${key}`, 0, MAX_RETENTION_MS);
    }
  }
  if (config.paused !== undefined) {
    if (typeof config.paused !== 'boolean')
      throw new ValidationError('config.paused', 'must be true or false');
    changes.paused = config.paused;
  }
  const limits = [
    ['concurrencyLimitPerKey', 1, 100_000],
    ['agingIntervalMs', 1, 30 * 86_400_000],
    ['agingMaxBoost', 1, 1_000_000],
  ] as const;
  for (const [key, min, max] of limits) {
    const value = config[key];
    if (value !== undefined)
      changes[key] = value === null ? null : assertInt(value, `config.${key}`, min, max);
  }
  if (config.rateLimit !== undefined) changes.rateLimit = parseRateLimit(config.rateLimit);
  if (config.concurrencyLimit !== undefined)
    changes.concurrencyLimit = parseConcurrencyLimit(config.concurrencyLimit);
  if (config.fairness !== undefined) changes.fairness = parseFairness(config.fairness);
  try {
    return toSettings(await configureQueueRow(db, schema, queue, changes));
  } catch (err) {
    const constraint = (err as { cause?: { constraint?: unknown } }).cause?.constraint;
    if (isLeaseholdError(err, 'DATABASE') && constraint === ONE_LIMITED_CLAIM_CONSTRAINT)
      throw new ValidationError(
        'config',
        'concurrencyLimitPerKey cannot be combined with rateLimit or concurrencyLimit on one queue; nothing was changed',
      );
    if (isLeaseholdError(err, 'DATABASE') && constraint === FAIRNESS_ALONE_CONSTRAINT)
      throw new ValidationError(
        'config',
        'fairness cannot be combined with rateLimit or concurrencyLimit on one queue (yet); nothing was changed',
      );
    throw err;
  }
}

/** The options `lh.listQueues` accepts (docs/api.md names each; docs-options.test.ts checks). */
export const LIST_QUEUES_KEYS: readonly string[] = ['limit', 'unattendedAfterMs'];

/** Lists every queue that has jobs or settings, by name. */
export async function queueSummaries(
  db: Queryable,
  schema: string,
  given: { limit?: number; unattendedAfterMs?: number } | undefined,
): Promise<QueueSummary[]> {
  const options = optionsObject(given);
  rejectUnknownOptions(options, LIST_QUEUES_KEYS, 'options');
  const rows = await listQueues(db, schema, optionalInt(options.limit, 'limit', 1, 10_000, 1000));
  const afterMs = optionalInt(
    options.unattendedAfterMs,
    'unattendedAfterMs',
    0,
    86_400_000,
    DEFAULT_UNATTENDED_AFTER_MS,
  );
  return rows.map((row) => ({
    name: row.name,
    pending: row.pending,
    running: row.running,
    dead: row.dead,
    cancelled: row.cancelled,
    oldestClaimableAgeMs: row.oldest_claimable_ms === null ? null : Math.round(row.oldest_claimable_ms),
    owner: row.owner,
    paused: row.paused,
    unattended: isUnattended(
      { paused: row.paused, oldestClaimableAgeMs: row.oldest_claimable_ms, liveLeases: row.live },
      afterMs,
    ),
    deadRetentionMs: row.dead_retention_ms,
    succeededRetentionMs: row.succeeded_retention_ms,
  }));
}

function toSettings(row: QueueRow): QueueSettings {
  return {
    name: row.name,
    owner: row.owner,
    deadRetentionMs: row.dead_retention_ms,
    succeededRetentionMs: row.succeeded_retention_ms,
    paused: row.paused,
    updatedAt: row.updated_at,
    concurrencyLimitPerKey: row.concurrency_limit_per_key,
    agingIntervalMs: row.aging_interval_ms,
    agingMaxBoost: row.aging_max_boost,
    rateLimit:
      row.rate_limit_max === null || row.rate_limit_per_ms === null
        ? null
        : { max: row.rate_limit_max, perMs: row.rate_limit_per_ms, perKey: row.rate_limit_per_key },
    concurrencyLimit: row.concurrency_limit,
    fairness: row.fairness,
  };
}

/** The fairness policies a queue may have; null turns fairness off. */
const FAIRNESS_POLICIES = ['round-robin'] as const;

/** Validates `config.fairness`: `'round-robin'` or null. */
function parseFairness(value: unknown): 'round-robin' | null {
  if (value === null) return null;
  if (typeof value === 'string' && (FAIRNESS_POLICIES as readonly string[]).includes(value))
    return value as 'round-robin';
  throw new ValidationError('config.fairness', "must be 'round-robin' or null (off)");
}
