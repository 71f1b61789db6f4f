import { Command } from 'commander';
import { listDead } from '../../operations/operator/dead.js';
import { assertKnownQueue } from '../../operations/queues/known-queues.js';
import { type AdminFlags, contextFromFlags, isoTime, type OpenContext, positiveInt } from '../admin.js';
import { adminCommand } from '../admin-command.js';
import { BUDGET_NOTE, formatAttempts, formatTable, formatTime, oneLine } from '../format.js';

interface DeadListFlags extends AdminFlags {
  queue?: string;
  errorCode?: string;
  before?: Date;
  limit?: number;
  cursor?: string;
}

/** `leasehold dead list`: dead jobs, newest first, with why they died. */
export function deadCommand(open: OpenContext = contextFromFlags): Command {
  const list = adminCommand<DeadListFlags, Awaited<ReturnType<typeof listDead>>>(
    {
      name: 'list',
      description: 'list dead jobs, newest first, with their error summary (never their payloads)',
      define: (command) =>
        command
          .option('--queue <name>', 'only this queue')
          .option('--error-code <code>', 'only jobs that died with this error code')
          .option('--before <time>', 'only jobs that died before this ISO 8601 time', isoTime)
          .option('--limit <n>', 'jobs per page (at most 1000)', positiveInt, 50)
          .option('--cursor <cursor>', 'continue after the page that printed this cursor'),
      help: `
Examples:
  $ leasehold dead list --queue emails
  $ leasehold dead list --error-code ETIMEDOUT --limit 200 --json
  $ leasehold dead list --queue emails --cursor <the cursor printed by the previous page>`,
      run: async (context, _args, flags) => {
        // A typo lists nothing and says nothing: refuse a queue that is not known instead.
        if (flags.queue !== undefined) await assertKnownQueue(context.pool, context.schema, flags.queue);
        return listDead(context, {
          ...(flags.queue !== undefined && { queue: flags.queue }),
          ...(flags.errorCode !== undefined && { errorCode: flags.errorCode }),
          ...(flags.before !== undefined && { before: flags.before }),
          ...(flags.limit !== undefined && { limit: flags.limit }),
          ...(flags.cursor !== undefined && { cursor: flags.cursor }),
        });
      },
      text: (page) => describePage(page),
    },
    open,
  );
  return new Command('dead').description('inspect dead jobs').addCommand(list);
}

function describePage(page: Awaited<ReturnType<typeof listDead>>): string {
  if (page.jobs.length === 0) return 'no dead jobs';
  const rows = page.jobs.map((job) => [
    job.id,
    job.queueName,
    formatAttempts(job.attemptCount, job.maxAttempts, job.attemptBudget),
    formatTime(job.diedAt),
    job.errorCode ?? '',
    oneLine(job.errorMessage, 60),
  ]);
  const lines = [formatTable(['id', 'queue', 'attempts', 'died', 'code', 'message'], rows)];
  if (page.jobs.some((job) => job.attemptBudget !== null && job.attemptBudget < job.maxAttempts)) {
    lines.push(`(${BUDGET_NOTE})`);
  }
  if (page.cursor) lines.push(`more: --cursor ${page.cursor}`);
  return lines.join('\n');
}
