import { Command, Option } from 'commander';
import { startDashboard } from '../../index.js';
import { type AdminFlags, addAdminOptions, positiveInt, withAdminClient } from '../admin.js';
import type { Interrupt } from '../interrupt.js';
import { note } from '../log.js';

interface DashboardFlags extends AdminFlags {
  port: number;
  host: string;
  token?: string;
}

/** `leasehold dashboard`: the web dashboard (queues, jobs, dead jobs with replay and cancel). */
export function dashboardCommand(interrupt: Interrupt): Command {
  const command = new Command('dashboard')
    .description('serve the web dashboard: queues live, job history, dead jobs with replay and cancel')
    .option('--port <n>', 'port to listen on', positiveInt, 8080)
    .option('--host <address>', 'address to bind; anything but loopback requires --token', '127.0.0.1')
    .addOption(
      new Option('--token <secret>', 'access token required on every request').env(
        'LEASEHOLD_DASHBOARD_TOKEN',
      ),
    );
  addAdminOptions(command, { json: false });
  command.addHelpText(
    'after',
    `
Replays and cancels are recorded in each job's history with the actor "dashboard".

Examples:
  $ leasehold dashboard
  $ LEASEHOLD_DASHBOARD_TOKEN=$(openssl rand -hex 16) leasehold dashboard --host 0.0.0.0
    (then open http://<host>:8080/?token=<the token> once; a cookie keeps it)`,
  );
  command.action(async (flags: DashboardFlags) => {
    await withAdminClient(flags, async (lh) => {
      const dashboard = await startDashboard(lh, {
        port: flags.port,
        host: flags.host,
        ...(flags.token && { token: flags.token }),
      });
      note(`dashboard at ${dashboard.url}/`);
      await interrupt.wait();
      await dashboard.close();
    });
  });
  return command;
}
