import { defineStatement, type Queryable, run } from '../db.js';

/**
 * JobTraceAttach: records the enqueue span's `traceparent` on jobs just inserted (ids $1), so the
 * handler's span can continue the trace. Changes no status; takes the rows' locks briefly (primary
 * key). Runs only when OpenTelemetry is recording, in the enqueue's own transaction when it has one.
 * Only a pending job without a traceparent takes one: what the enqueue just inserted. A job a
 * worker claimed first keeps none (its claim read none), and the producer role, which runs this as
 * a function (functions.ts), cannot rewrite the trace of a running or traced job.
 */
export const JobTraceAttach = defineStatement(
  'attach_traceparent',
  (s) => `
  UPDATE ${s}.jobs SET traceparent = $2
  WHERE id = ANY($1::bigint[]) AND status::text = 'pending' AND traceparent IS NULL`,
);

/**
 * JobTraceRead: the `traceparent` of claimed jobs (ids $1), by primary key, no locks. Runs only
 * when OpenTelemetry is recording: one extra statement per claim batch.
 */
const JobTraceRead = defineStatement(
  'read_traceparents',
  (s) => `
  SELECT id::text AS id, traceparent
  FROM ${s}.jobs
  WHERE id = ANY($1::bigint[]) AND traceparent IS NOT NULL`,
);

/** Stores `traceparent` on the given jobs. */
export async function attachTraceparent(
  db: Queryable,
  schema: string,
  ids: readonly string[],
  traceparent: string,
): Promise<void> {
  await run(db, JobTraceAttach(schema), [ids, traceparent]);
}

/** Reads the traceparents of the given jobs (only those that have one). */
export async function readTraceparents(
  db: Queryable,
  schema: string,
  ids: readonly string[],
): Promise<Map<string, string>> {
  const rows = await run<{ id: string; traceparent: string }>(db, JobTraceRead(schema), [ids]);
  return new Map(rows.map((row) => [row.id, row.traceparent]));
}
