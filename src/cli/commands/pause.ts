import type { Command } from 'commander';
import { setQueuePaused } from '../../operations/queues/queue-settings.js';
import { type AdminFlags, contextFromFlags, type OpenContext } from '../admin.js';
import { adminCommand } from '../admin-command.js';

/** `leasehold pause <queue>`: stop claims from a queue; running jobs finish. (`resume` below.) */
export function pauseCommand(open: OpenContext = contextFromFlags): Command {
  return adminCommand<AdminFlags & { create?: boolean }, Awaited<ReturnType<typeof setQueuePaused>>>(
    {
      name: 'pause',
      description: 'pause a queue: its jobs are not claimed until it is resumed; running jobs finish',
      define: (command) =>
        command
          .argument('<queue>', 'the queue name')
          .option(
            '--create',
            'pause a queue that is not known yet (before its first job); without it, an unknown name is refused',
          ),
      help: '\nExamples:\n  $ leasehold pause emails\n  $ leasehold pause emails --json\n  $ leasehold pause reports --create   # before the first report is enqueued',
      run: (context, [queue], flags) =>
        setQueuePaused(context, queue as string, true, { create: flags.create === true }),
      text: (settings) =>
        `queue ${settings.name} paused: no new claims until \`leasehold resume ${settings.name}\``,
    },
    open,
  );
}

/** `leasehold resume <queue>`: let a paused queue be claimed again. */
export function resumeCommand(open: OpenContext = contextFromFlags): Command {
  return adminCommand<AdminFlags, Awaited<ReturnType<typeof setQueuePaused>>>(
    {
      name: 'resume',
      description: 'resume a paused queue: its jobs are claimed again',
      define: (command) => command.argument('<queue>', 'the queue name'),
      help: '\nExamples:\n  $ leasehold resume emails\n  $ leasehold resume emails --json',
      run: (context, [queue]) => setQueuePaused(context, queue as string, false),
      text: (settings) => `queue ${settings.name} resumed`,
    },
    open,
  );
}
