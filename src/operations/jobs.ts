import type { LeaseholdContext } from '../context.js';
import type { JobWithHistory } from '../job-history.js';
import { type Job, readJob } from '../storage/read.js';
import { rejectUnknownOptions } from '../unknown-options.js';
import { assertJobId, optionalBoolean, optionsObject } from '../validation.js';
import { readJobWithHistory } from './history.js';

/** `lh.getJob`: one job, or null; with `history: true`, its history in order, from one snapshot. */
export async function getJob(
  context: LeaseholdContext,
  id: string | bigint | number,
  given?: { history?: boolean },
): Promise<Job | JobWithHistory | null> {
  const jobId = assertJobId(id);
  const options = optionsObject(given);
  rejectUnknownOptions(options, ['history'], 'options');
  if (optionalBoolean(options.history, 'history', false)) {
    return readJobWithHistory(context.pool, context.schema, jobId);
  }
  return readJob(context.pool, context.schema, jobId);
}
