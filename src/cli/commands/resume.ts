import type { Command } from 'commander';
import { setQueuePaused } from '../../operations/queues/queue-settings.js';
import { type AdminFlags, contextFromFlags, type OpenContext } from '../admin.js';
import { adminCommand } from '../admin-command.js';

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
