import type pg from 'pg';
import { type JobWithHistory, synthesiseHistory } from '../../records/job-history.js';
import { inReadSnapshot, readJobEvents, readLeaseExtensions } from '../../storage/jobs/history.js';
import { readJob } from '../../storage/jobs/read.js';

/** Reads a job and its history from one snapshot; null when there is no such job. */
export function readJobWithHistory(
  pool: pg.Pool,
  schema: string,
  id: string,
): Promise<JobWithHistory | null> {
  return inReadSnapshot(pool, async (db) => {
    const job = await readJob(db, schema, id);
    if (!job) return null;
    const rows = await readJobEvents(db, schema, id);
    const extensions = await readLeaseExtensions(db, schema, id);
    return { ...job, history: synthesiseHistory(job, rows, extensions) };
  });
}
