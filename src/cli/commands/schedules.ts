import { Command } from 'commander';
import {
  listSchedules,
  type ScheduleInfo,
  setPaused,
  unschedule,
} from '../../operations/producer/schedules.js';
import { type AdminFlags, contextFromFlags, type OpenContext } from '../admin.js';
import { type AdminCommandSpec, adminCommand } from '../admin-command.js';
import { CliError } from '../errors.js';
import { formatTable, formatTime } from '../format.js';

/** `leasehold schedules list|pause|resume|remove`: the cron schedules every worker fires. */
export function schedulesCommand(open: OpenContext = contextFromFlags): Command {
  const list = adminCommand<AdminFlags, Omit<ScheduleInfo, 'payload'>[]>(
    {
      name: 'list',
      description: 'list schedules: cron, zone, target, next and last tick, paused (payloads are left out)',
      run: async (context) => (await listSchedules(context)).map(withoutPayload),
      text: (shown) => describeSchedules(shown),
    },
    open,
  );

  const pause = nameCommand(
    'pause',
    'pause a schedule: it fires nothing until resumed',
    open,
    async (context, name) => {
      const info = await setPaused(context, name, true).catch(notFound(name));
      return {
        info,
        text: `schedule ${name} paused: no ticks fire until \`leasehold schedules resume ${name}\``,
      };
    },
  );
  const resume = nameCommand(
    'resume',
    'resume a schedule: it fires from its next tick on (ticks named while paused do not fire)',
    open,
    async (context, name) => {
      const info = await setPaused(context, name, false).catch(notFound(name));
      return { info, text: `schedule ${name} resumed: next tick ${formatTime(info.nextTickAt)}` };
    },
  );
  const remove = nameCommand(
    'remove',
    'remove a schedule; the jobs it already enqueued stay',
    open,
    async (context, name) => {
      if (!(await unschedule(context, name))) throw new CliError(`no schedule ${name}`);
      return { info: { name, removed: true }, text: `schedule ${name} removed` };
    },
  );

  return new Command('schedules')
    .description('inspect and control cron schedules (created in code with lh.schedule)')
    .addCommand(list)
    .addCommand(pause)
    .addCommand(resume)
    .addCommand(remove)
    .addHelpText(
      'after',
      `
Examples:
  $ leasehold schedules list --database-url postgres://localhost/app
  $ leasehold schedules list --json | jq '.[] | select(.paused)'
  $ leasehold schedules pause nightly-report
  $ leasehold schedules remove nightly-report --json`,
    );
}

type Context = Parameters<AdminCommandSpec<AdminFlags, unknown>['run']>[0];

function nameCommand(
  verb: string,
  description: string,
  open: OpenContext,
  act: (context: Context, name: string) => Promise<{ info: object; text: string }>,
): Command {
  return adminCommand<AdminFlags, { info: object; text: string }>(
    {
      name: verb,
      description,
      define: (command) => command.argument('<name>', 'the schedule name'),
      run: (context, [name]) => act(context, name as string),
      json: ({ info }) => ('payload' in info ? withoutPayload(info as ScheduleInfo) : info),
      text: ({ text }) => text,
    },
    open,
  );
}

function describeSchedules(shown: readonly Omit<ScheduleInfo, 'payload'>[]): string {
  if (shown.length === 0) return 'no schedules yet';
  const rows = shown.map((s) => [
    s.name,
    s.cron,
    s.timezone ?? 'UTC',
    s.task ? `task ${s.task}` : `queue ${s.queue}`,
    s.paused ? 'paused' : formatTime(s.nextTickAt),
    formatTime(s.lastTickAt),
    s.lastJobId ?? '-',
  ]);
  return formatTable(['schedule', 'cron', 'zone', 'enqueues to', 'next tick', 'last tick', 'last job'], rows);
}

// An unknown name reads as the operator's mistake, not a validation error of the API.
function notFound(name: string): (err: unknown) => never {
  return (err) => {
    if (err instanceof Error && /names no schedule/.test(err.message))
      throw new CliError(`no schedule ${name}`);
    throw err;
  };
}

// Payloads may hold personal data: the CLI never prints them (lh.schedules() returns them).
function withoutPayload(info: ScheduleInfo): Omit<ScheduleInfo, 'payload'> {
  const { payload: _payload, ...rest } = info;
  return rest;
}
