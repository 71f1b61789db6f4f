import { Command } from 'commander';
import { getJob } from '../../operations/operator/jobs.js';
import type { JobEvent, JobWithHistory } from '../../records/job-history.js';
import { type AdminFlags, contextFromFlags, jobIdArgument, type OpenContext } from '../admin.js';
import { adminCommand } from '../admin-command.js';
import { deathBudget, formatAttempts, formatDuration, formatTable, formatTime, oneLine } from '../format.js';

interface ShowFlags extends AdminFlags {
  payload?: boolean;
}

/** `leasehold jobs show <id>`: one job and its history, in order. */
export function jobsCommand(open: OpenContext = contextFromFlags): Command {
  const show = adminCommand<ShowFlags, JobWithHistory | null>(
    {
      name: 'show',
      description: 'show a job and its history: every attempt, who held it, how it ended',
      define: (command) =>
        command
          .argument('<id>', 'the job id', jobIdArgument)
          .option(
            '--payload',
            'include the payload, result and progress (left out by default: they may hold personal data)',
          ),
      help: `
Examples:
  $ leasehold jobs show 42 --database-url postgres://localhost/app
  $ leasehold jobs show 42 --json | jq '.history[] | select(.kind == "dead")'`,
      run: (context, [id]) =>
        getJob(context, id as string, { history: true }) as Promise<JobWithHistory | null>,
      missing: ([id]) => `no job ${id} (never created, or removed by retention)`,
      // Like the payload, a result or progress detail is the user's data: shown only when asked for.
      json: (job, flags) =>
        flags.payload ? job : { ...job, payload: undefined, result: undefined, progress: undefined },
      text: (job, flags) => describeJob(job, flags.payload === true),
    },
    open,
  );
  return new Command('jobs').description('inspect jobs').addCommand(show);
}

function describeJob(job: JobWithHistory, withPayload: boolean): string {
  const lines = [
    `job ${job.id} in queue ${job.queueName}: ${job.status}`,
    `  attempts ${formatAttempts(job.attemptCount, job.maxAttempts, job.status === 'dead' ? deathBudget(job.history) : null)}, priority ${job.priority}`,
    `  created ${formatTime(job.createdAt)}, available ${formatTime(job.availableAt)}${
      job.finishedAt ? `, finished ${formatTime(job.finishedAt)}` : ''
    }`,
  ];
  if (job.status === 'running') {
    lines.push(
      `  leased by ${job.leaseOwner} (token ${job.leaseToken}) until ${formatTime(job.leaseExpiresAt)}`,
    );
  }
  if (job.lastErrorCode) {
    lines.push(
      `  last error: ${job.lastErrorCode}${job.lastErrorMessage ? ` ${oneLine(job.lastErrorMessage, 200)}` : ''}`,
    );
  }
  if (withPayload) {
    lines.push(`  payload: ${JSON.stringify(job.payload)}`);
    if (job.progress !== null) lines.push(`  progress: ${JSON.stringify(job.progress)}`);
    if (job.status === 'succeeded') lines.push(`  result: ${JSON.stringify(job.result)}`);
  }
  lines.push('', 'history:');
  const rows = job.history.map((event) => [
    formatTime(event.at),
    event.kind,
    event.attempt === null ? '' : String(event.attempt),
    event.owner ?? '',
    event.token ?? '',
    describeEvent(event),
  ]);
  lines.push(formatTable(['at', 'event', 'attempt', 'owner', 'token', 'detail'], rows));
  return lines.join('\n');
}

function describeEvent(event: JobEvent): string {
  const parts: string[] = [];
  if (event.kind === 'step') parts.push(describeStep(event.detail));
  if (event.errorCode) parts.push(event.errorCode);
  if (event.message && event.kind !== 'cancelled') parts.push(oneLine(event.message, 80));
  if (event.delayMs !== null) parts.push(`again in ${formatDuration(event.delayMs)}`);
  if (event.leaseExtensions) parts.push(`${event.leaseExtensions} lease extension(s)`);
  if (event.operation) parts.push(`${event.operation} refused`);
  if (event.actor) parts.push(`by ${event.actor}`);
  if (event.reason) parts.push(`reason: ${oneLine(event.reason, 80)}`);
  return parts.join('; ');
}

// A durable step's event: its numbered name, a sleep's wake time (never its result: user data).
function describeStep(detail: unknown): string {
  const { step, kind, wakeAt, timeoutAt, childId } = (detail ?? {}) as Record<string, unknown>;
  const name = typeof step === 'string' ? step : '?';
  if (kind === 'invoke') return `invoke ${name}: job ${typeof childId === 'string' ? childId : '?'}`;
  if (kind === 'wait') {
    return `wait ${name} for its event${typeof timeoutAt === 'string' ? ` until ${formatTime(new Date(timeoutAt))}` : ''}`;
  }
  if (kind !== 'sleep') return `step ${name} recorded`;
  return `sleep ${name}${typeof wakeAt === 'string' ? ` until ${formatTime(new Date(wakeAt))}` : ''}`;
}
