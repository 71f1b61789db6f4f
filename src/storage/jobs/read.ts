import { defineStatement, type Queryable, run } from '../db.js';

/** The statuses a job moves through. `cancelled` is terminal, set only by an operator's cancel. */
export type JobStatus = 'pending' | 'running' | 'succeeded' | 'dead' | 'cancelled';

/**
 * A job row, camelCased. ids and tokens are strings so no precision is lost. A succeeded job is
 * read from its compact finished record: `payload` is null and `leaseOwner`/`leaseToken` name the
 * claim whose completion was accepted. `result` (a succeeded job's handler's return value) and
 * `progress` (the latest `job.progress(detail)` of a job not yet succeeded) are user data like the
 * payload: shown where the payload is, never logged.
 */
export interface Job {
  id: string;
  queueName: string;
  payload: unknown;
  status: JobStatus;
  priority: number;
  availableAt: Date;
  attemptCount: number;
  maxAttempts: number;
  leaseOwner: string | null;
  leaseToken: string;
  leaseExpiresAt: Date | null;
  claimedAt: Date | null;
  lastErrorCode: string | null;
  lastErrorClass: string | null;
  lastErrorMessage: string | null;
  lastErrorStack: string | null;
  createdAt: Date;
  finishedAt: Date | null;
  /** The schedule and tick (database time) that created the job; absent for a job no schedule created. */
  schedule?: { name: string; tickAt: Date };
  /** The handler's return value, as JSON, once the job succeeded; null before, or when it returned nothing. */
  result: unknown;
  /** The latest progress detail a run reported (`job.progress(detail)`); null when none, and once succeeded. */
  progress: unknown;
}

interface JobRow {
  id: string;
  queue_name: string;
  payload: unknown;
  status: JobStatus;
  priority: number;
  available_at: Date;
  attempt_count: number;
  max_attempts: number;
  lease_owner: string | null;
  lease_token: string;
  lease_expires_at: Date | null;
  claimed_at: Date | null;
  last_error_code: string | null;
  last_error_class: string | null;
  last_error_message: string | null;
  last_error_stack: string | null;
  created_at: Date;
  finished_at: Date | null;
  result: unknown;
  progress: unknown;
}

/**
 * JobGetById: reads one job by primary key, without locking it: from jobs while it is live or dead,
 * from finished_jobs once it succeeded (no payload is kept there, but the handler's result is).
 */
export const JobGetById = defineStatement('get_job', (s) => getJobText(s, 'payload'));

/**
 * JobGetByIdWithoutPayload: JobGetById with a null payload, for the producer and worker roles,
 * which may not read payloads (a claimed job's payload comes back from the claim). Runs in place of
 * JobGetById on a client that goes through the schema's functions (see functions.ts).
 */
export const JobGetByIdWithoutPayload = defineStatement('get_job_without_payload', (s) =>
  getJobText(s, 'NULL::jsonb'),
);

const getJobText = (s: string, payload: string) => `
  SELECT id, queue_name, ${payload} AS payload, status::text AS status, priority, available_at, attempt_count,
         max_attempts, lease_owner, lease_token, lease_expires_at, claimed_at, last_error_code,
         last_error_class, last_error_message, last_error_stack, created_at, finished_at,
         NULL::jsonb AS result, progress
  FROM ${s}.jobs
  WHERE id = $1
  UNION ALL
  SELECT id, queue_name, NULL, 'succeeded', priority, claimed_at, attempt_count,
         max_attempts, lease_owner, lease_token, NULL, claimed_at, NULL,
         NULL, NULL, NULL, created_at, finished_at, result, NULL
  FROM ${s}.finished_jobs
  WHERE id = $1`;

/** Reads one job; null when there is none with that id. */
export async function readJob(db: Queryable, schema: string, id: string): Promise<Job | null> {
  const rows = await run<JobRow>(db, JobGetById(schema), [id]);
  const row = rows[0];
  return row ? toJob(row) : null;
}

function toJob(row: JobRow): Job {
  return {
    id: row.id,
    queueName: row.queue_name,
    payload: row.payload,
    status: row.status,
    priority: row.priority,
    availableAt: row.available_at,
    attemptCount: row.attempt_count,
    maxAttempts: row.max_attempts,
    leaseOwner: row.lease_owner,
    leaseToken: row.lease_token,
    leaseExpiresAt: row.lease_expires_at,
    claimedAt: row.claimed_at,
    lastErrorCode: row.last_error_code,
    lastErrorClass: row.last_error_class,
    lastErrorMessage: row.last_error_message,
    lastErrorStack: row.last_error_stack,
    createdAt: row.created_at,
    finishedAt: row.finished_at,
    result: row.result ?? null,
    progress: row.progress ?? null,
  };
}

/** LeaseRefusalList: lost-fence attempts counted so far, per queue and operation. */
const LeaseRefusalList = defineStatement(
  'list_refusals',
  (s) => `
  SELECT queue_name, operation, refused_count::text AS refused_count, last_refused_at
  FROM ${s}.lease_refusals
  ORDER BY queue_name, operation`,
);

/** Lost-fence attempts counted per queue and operation. */
export interface RefusalCount {
  queue: string;
  operation: string;
  count: number;
  lastRefusedAt: Date;
}

/** Reads the lost-fence counters. */
export async function readRefusals(db: Queryable, schema: string): Promise<RefusalCount[]> {
  const rows = await run<{
    queue_name: string;
    operation: string;
    refused_count: string;
    last_refused_at: Date;
  }>(db, LeaseRefusalList(schema), []);
  return rows.map((row) => ({
    queue: row.queue_name,
    operation: row.operation,
    count: Number(row.refused_count),
    lastRefusedAt: row.last_refused_at,
  }));
}
