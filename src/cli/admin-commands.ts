import type { Command } from 'commander';
import { cancelCommand } from './commands/cancel.js';
import { deadCommand } from './commands/dead-list.js';
import { jobsCommand } from './commands/jobs-show.js';
import { pauseCommand } from './commands/pause.js';
import { pruneCommand } from './commands/prune.js';
import { queuesCommand } from './commands/queues.js';
import { replayCommand } from './commands/replay.js';
import { resumeCommand } from './commands/resume.js';
import type { Interrupt } from './interrupt.js';

/** The operator's commands: inspect, replay, cancel, pause and prune. They use only the public client. */
export function adminCommands(interrupt: Interrupt): Command[] {
  return [
    jobsCommand(),
    deadCommand(),
    replayCommand(interrupt),
    cancelCommand(),
    queuesCommand(),
    pauseCommand(),
    resumeCommand(),
    pruneCommand(),
  ];
}
