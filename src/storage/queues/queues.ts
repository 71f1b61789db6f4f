import { DatabaseError } from '../../shared/errors.js';
import { defineStatement, type Queryable, run } from '../db.js';
import { finishedQueueNamesCte } from './known-queues.js';

const UNDEFINED_COLUMN = '42703';

/**
 * QueueConfigure: creates or updates one queue's settings row. Each setting changes only when its
 * flag is true, so a call names just what it changes; a null value clears a setting back to its
 * default. Takes the queues row lock (primary key). A pause takes effect at the next claim
 * statement, which checks it; running jobs are not touched. A queue given a rate or concurrency
 * limit also gets its rate_limits row (the row its claims lock), and a queue given fairness its
 * fair_turns row (the cursor its claims move), in the same statement.
 */
const QueueConfigure = defineStatement(
  'configure_queue',
  (s) => `
  WITH configured AS (
    INSERT INTO ${s}.queues AS q (name, owner, dead_retention_ms, succeeded_retention_ms, paused,
                                  concurrency_limit_per_key, aging_interval_ms, aging_max_boost,
                                  rate_limit_max, rate_limit_per_ms, rate_limit_per_key, concurrency_limit,
                                  fairness)
    VALUES ($1, $3, $5, $7, coalesce($9, false), $11, $13, $15, $17, $18, coalesce($19, false), $21, $23)
    ON CONFLICT (name) DO UPDATE
      SET owner = CASE WHEN $2 THEN excluded.owner ELSE q.owner END,
          concurrency_limit_per_key = CASE WHEN $10 THEN excluded.concurrency_limit_per_key
                                           ELSE q.concurrency_limit_per_key END,
          aging_interval_ms = CASE WHEN $12 THEN excluded.aging_interval_ms ELSE q.aging_interval_ms END,
          aging_max_boost = CASE WHEN $14 THEN excluded.aging_max_boost ELSE q.aging_max_boost END,
          dead_retention_ms = CASE WHEN $4 THEN excluded.dead_retention_ms ELSE q.dead_retention_ms END,
          succeeded_retention_ms = CASE WHEN $6 THEN excluded.succeeded_retention_ms
                                        ELSE q.succeeded_retention_ms END,
          paused = CASE WHEN $8 THEN excluded.paused ELSE q.paused END,
          rate_limit_max = CASE WHEN $16 THEN excluded.rate_limit_max ELSE q.rate_limit_max END,
          rate_limit_per_ms = CASE WHEN $16 THEN excluded.rate_limit_per_ms ELSE q.rate_limit_per_ms END,
          rate_limit_per_key = CASE WHEN $16 THEN excluded.rate_limit_per_key ELSE q.rate_limit_per_key END,
          concurrency_limit = CASE WHEN $20 THEN excluded.concurrency_limit ELSE q.concurrency_limit END,
          fairness = CASE WHEN $22 THEN excluded.fairness ELSE q.fairness END,
          updated_at = now()
    RETURNING name, owner, dead_retention_ms::float8 AS dead_retention_ms,
              succeeded_retention_ms::float8 AS succeeded_retention_ms, paused, updated_at,
              concurrency_limit_per_key, aging_interval_ms::float8 AS aging_interval_ms, aging_max_boost,
              rate_limit_max, rate_limit_per_ms, rate_limit_per_key, concurrency_limit, fairness
  ),
  -- A limited queue's limiter row, which its claims lock (see claim/throttle.ts); kept when the
  -- limits are cleared, so its throttled counters survive a reconfiguration.
  limiter AS (
    INSERT INTO ${s}.rate_limits (queue_name)
    SELECT name FROM configured WHERE rate_limit_max IS NOT NULL OR concurrency_limit IS NOT NULL
    ON CONFLICT (queue_name) DO NOTHING
  ),
  -- A round-robin queue's cursor row, which its claims move (see claim/round-robin.ts); kept when
  -- fairness is turned off, so turning it on again resumes the rotation where it stopped.
  turns AS (
    INSERT INTO ${s}.fair_turns (queue_name)
    SELECT name FROM configured WHERE fairness IS NOT NULL
    ON CONFLICT (queue_name) DO NOTHING
  )
  SELECT * FROM configured`,
);

/**
 * QueueSummaryList: per queue, live and dead counts, the age of the oldest claimable job, and its
 * settings; for every known queue (storage/queues/known-queues.ts: jobs, a settings row, finished records
 * found by a loose scan of finished_jobs_queue_idx, a schedule), zeros for a drained one, by name,
 * at most $1. Read-only, no locks. It aggregates the jobs table (live work and kept terminal jobs
 * only: succeeded jobs have left it), so its cost grows with the backlog: an operator's command,
 * not a metric to poll fast.
 */
const QueueSummaryList = defineStatement(
  'list_queues',
  (s) => `
  WITH RECURSIVE counts AS (
    SELECT queue_name,
           count(*) FILTER (WHERE status = 'pending')::int AS pending,
           count(*) FILTER (WHERE status = 'running')::int AS running,
           count(*) FILTER (WHERE status = 'running' AND lease_expires_at > now())::int AS live,
           count(*) FILTER (WHERE status = 'dead')::int AS dead,
           count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled,
           extract(epoch FROM now() - min(available_at) FILTER (
             WHERE status = 'pending' AND NOT awaits_predecessor AND waiting_parents = 0 AND available_at <= now())) * 1000
             AS oldest_claimable_ms
    FROM ${s}.jobs
    GROUP BY queue_name
  ),
  ${finishedQueueNamesCte(s)},
  names AS (
    SELECT queue_name AS name FROM counts
    UNION SELECT name FROM ${s}.queues
    UNION SELECT queue_name FROM finished_names WHERE queue_name IS NOT NULL
    UNION SELECT queue_name FROM ${s}.schedules
  )
  SELECT n.name,
         coalesce(c.pending, 0) AS pending, coalesce(c.running, 0) AS running,
         coalesce(c.live, 0) AS live,
         coalesce(c.dead, 0) AS dead, coalesce(c.cancelled, 0) AS cancelled,
         c.oldest_claimable_ms::float8 AS oldest_claimable_ms,
         q.owner, coalesce(q.paused, false) AS paused,
         q.dead_retention_ms::float8 AS dead_retention_ms,
         q.succeeded_retention_ms::float8 AS succeeded_retention_ms
  FROM names AS n
  LEFT JOIN counts AS c ON c.queue_name = n.name
  LEFT JOIN ${s}.queues AS q ON q.name = n.name
  ORDER BY 1
  LIMIT $1`,
);

/** A queues row as returned. */
export interface QueueRow {
  name: string;
  owner: string | null;
  dead_retention_ms: number | null;
  succeeded_retention_ms: number | null;
  paused: boolean;
  updated_at: Date;
  concurrency_limit_per_key: number | null;
  aging_interval_ms: number | null;
  aging_max_boost: number | null;
  rate_limit_max: number | null;
  rate_limit_per_ms: number | null;
  rate_limit_per_key: boolean;
  concurrency_limit: number | null;
  fairness: 'round-robin' | null;
}

/** What to change; `undefined` leaves a setting as it is, `null` clears it. */
export interface QueueChanges {
  owner?: string | null;
  deadRetentionMs?: number | null;
  succeededRetentionMs?: number | null;
  paused?: boolean;
  concurrencyLimitPerKey?: number | null;
  agingIntervalMs?: number | null;
  agingMaxBoost?: number | null;
  /** A rate limit replaces the stored one whole (all three columns); null clears it. */
  rateLimit?: { max: number; perMs: number; perKey: boolean } | null;
  concurrencyLimit?: number | null;
  /** How the claim takes turns between fairness keys; null claims in preference order. */
  fairness?: 'round-robin' | null;
}

/** The constraint that keeps a per-key concurrency limit apart from rate and concurrency limits. */
export const ONE_LIMITED_CLAIM_CONSTRAINT = 'queues_one_limited_claim';
/** The constraint that keeps fairness apart from rate and concurrency limits (022). */
export const FAIRNESS_ALONE_CONSTRAINT = 'queues_fairness_alone';

/** Creates or updates a queue's settings; returns the row. */
export async function configureQueue(
  db: Queryable,
  schema: string,
  queue: string,
  changes: QueueChanges,
): Promise<QueueRow> {
  const rows = await run<QueueRow>(db, QueueConfigure(schema), [
    queue,
    changes.owner !== undefined,
    changes.owner ?? null,
    changes.deadRetentionMs !== undefined,
    changes.deadRetentionMs ?? null,
    changes.succeededRetentionMs !== undefined,
    changes.succeededRetentionMs ?? null,
    changes.paused !== undefined,
    changes.paused ?? null,
    changes.concurrencyLimitPerKey !== undefined,
    changes.concurrencyLimitPerKey ?? null,
    changes.agingIntervalMs !== undefined,
    changes.agingIntervalMs ?? null,
    changes.agingMaxBoost !== undefined,
    changes.agingMaxBoost ?? null,
    changes.rateLimit !== undefined,
    changes.rateLimit?.max ?? null,
    changes.rateLimit?.perMs ?? null,
    changes.rateLimit?.perKey ?? null,
    changes.concurrencyLimit !== undefined,
    changes.concurrencyLimit ?? null,
    changes.fairness !== undefined,
    changes.fairness ?? null,
  ]);
  return rows[0] as QueueRow;
}

/** A queue summary row. */
export interface QueueSummaryRow {
  name: string;
  pending: number;
  running: number;
  /** Running jobs whose lease has not expired. */
  live: number;
  dead: number;
  cancelled: number;
  oldest_claimable_ms: number | null;
  owner: string | null;
  paused: boolean;
  dead_retention_ms: number | null;
  succeeded_retention_ms: number | null;
}

/** Lists queue summaries, by name, at most `limit`. */
export function listQueues(db: Queryable, schema: string, limit: number): Promise<QueueSummaryRow[]> {
  return run<QueueSummaryRow>(db, QueueSummaryList(schema), [limit]);
}

/**
 * QueueClaimSettings: the settings that choose a queue's claim statement (per-key limit, rate and
 * concurrency limits, fairness) and its aging. Primary-key read of queues; no locks.
 * QueueClaimSettingsBefore022 is the same read for a schema without 022's fairness column: a
 * process of this version started before the migration ran (a rolling upgrade) keeps claiming.
 */
const claimSettingsText = (s: string, fairness: boolean) => `
  SELECT concurrency_limit_per_key, aging_interval_ms IS NOT NULL AS aging,
         rate_limit_max IS NOT NULL OR concurrency_limit IS NOT NULL AS throttled,
         rate_limit_max IS NOT NULL AND rate_limit_per_key AS per_key_rate,
         ${fairness ? 'fairness IS NOT NULL' : 'false'} AS fair
  FROM ${s}.queues WHERE name = $1`;
const QueueClaimSettings = defineStatement('queue_claim_settings', (s) => claimSettingsText(s, true));
const QueueClaimSettingsBefore022 = defineStatement('queue_claim_settings_before_022', (s) =>
  claimSettingsText(s, false),
);

/** How long a schema found without 022 is read without fairness before a retry. */
const WITHOUT_FAIRNESS_RETRY_MS = 30_000;
/** Schemas found without queues.fairness, to the time (this process's clock) to try again. */
const withoutFairnessUntil = new Map<string, number>();

/** What a claimer needs to know of a queue: its per-key concurrency limit (null: none), and whether aging is on. */
export interface QueueClaimSettingsRow {
  limit: number | null;
  aging: boolean;
  /** A rate or concurrency limit is set: claims go through the throttled statement. */
  throttled: boolean;
  /** The rate limit counts per concurrency key. */
  perKeyRate: boolean;
  /** Fairness is on: claims go through the round-robin statement (claim/round-robin.ts). */
  fair: boolean;
}

/** Reads a queue's claim settings (defaults for a queue without a row). */
export async function readClaimSettings(
  db: Queryable,
  schema: string,
  queue: string,
): Promise<QueueClaimSettingsRow> {
  type Row = {
    concurrency_limit_per_key: number | null;
    aging: boolean;
    throttled: boolean;
    per_key_rate: boolean;
    fair: boolean;
  };
  let rows: Row[];
  const until = withoutFairnessUntil.get(schema);
  if (until !== undefined && Date.now() < until) {
    rows = await run<Row>(db, QueueClaimSettingsBefore022(schema), [queue]);
  } else {
    try {
      rows = await run<Row>(db, QueueClaimSettings(schema), [queue]);
      withoutFairnessUntil.delete(schema);
    } catch (err) {
      if (!(err instanceof DatabaseError) || err.sqlState !== UNDEFINED_COLUMN) throw err;
      withoutFairnessUntil.set(schema, Date.now() + WITHOUT_FAIRNESS_RETRY_MS);
      rows = await run<Row>(db, QueueClaimSettingsBefore022(schema), [queue]);
    }
  }
  const row = rows[0];
  return {
    limit: row?.concurrency_limit_per_key ?? null,
    aging: row?.aging ?? false,
    throttled: row?.throttled ?? false,
    perKeyRate: row?.per_key_rate ?? false,
    fair: row?.fair ?? false,
  };
}
