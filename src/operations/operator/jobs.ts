import type { LeaseholdContext } from '../../context/context.js';
import type { JobWithHistory } from '../../records/job-history.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { assertJobId, optionalBoolean, optionsObject } from '../../shared/validation.js';
import { type Job, readJob } from '../../storage/jobs/read.js';
import { readJobScheduleTick } from '../../storage/schedules/schedules.js';
import { readJobWithHistory } from './history.js';

export type { Job } from '../../storage/jobs/read.js';

/**
 * `lh.getJob`: one job, or null; with `history: true`, its history in order, from one snapshot.
 * A job a schedule created carries `schedule: { name, tickAt }`.
 */
export async function getJob(
  context: LeaseholdContext,
  id: string | bigint | number,
  given?: { history?: boolean },
): Promise<Job | JobWithHistory | null> {
  const jobId = assertJobId(id);
  const options = optionsObject(given);
  rejectUnknownOptions(options, ['history'], 'options');
  const job = optionalBoolean(options.history, 'history', false)
    ? await readJobWithHistory(context.pool, context.schema, jobId)
    : await readJob(context.pool, context.schema, jobId);
  // A job a schedule fired says which schedule and tick (schedule_ticks, by job id).
  const tick = job ? await readJobScheduleTick(context.pool, context.schema, jobId) : null;
  if (job && tick) job.schedule = tick;
  return job;
}
