import type { Command } from 'commander';
import { contextFromFlags, type OpenContext } from './admin.js';
import { cancelCommand } from './commands/cancel.js';
import { deadCommand } from './commands/dead-list.js';
import { flowsCommand } from './commands/flows-show.js';
import { jobsCommand } from './commands/jobs-show.js';
import { pauseCommand, resumeCommand } from './commands/pause.js';
import { pruneCommand } from './commands/prune.js';
import { queuesCommand } from './commands/queues.js';
import { replayCommand } from './commands/replay.js';
import { schedulesCommand } from './commands/schedules.js';
import type { Interrupt } from './interrupt.js';

/**
 * The operator's commands: inspect, replay, cancel, pause, prune and control schedules. Each runs on a context from
 * `open` and calls the public operation functions (src/operations/), as `Leasehold`'s methods do.
 */
export function adminCommands(interrupt: Interrupt, open: OpenContext = contextFromFlags): Command[] {
  return [
    jobsCommand(open),
    deadCommand(open),
    replayCommand(interrupt, open),
    cancelCommand(open),
    queuesCommand(open),
    pauseCommand(open),
    resumeCommand(open),
    pruneCommand(open),
    schedulesCommand(open),
    flowsCommand(open),
  ];
}
