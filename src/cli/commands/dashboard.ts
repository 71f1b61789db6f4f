import { randomBytes } from 'node:crypto';
import { Command, Option } from 'commander';
import { isLoopback } from '../../dashboard/security.js';
import { startDashboard } from '../../index.js';
import {
  type AdminFlags,
  addAdminOptions,
  contextFromFlags,
  type OpenContext,
  positiveInt,
  withAdminContext,
} from '../admin.js';
import type { Interrupt } from '../interrupt.js';
import { note } from '../log.js';

interface DashboardFlags extends AdminFlags {
  port: number;
  host: string;
  /** The secret, or false for `--no-token` (loopback only). */
  token?: string | false;
  allowHost: string[];
  trustProxy?: boolean;
  /** A second token that may only read. */
  viewerToken?: string;
}

/** `leasehold dashboard`: the web dashboard (queues, jobs, dead jobs with replay and cancel). */
export function dashboardCommand(interrupt: Interrupt, open: OpenContext = contextFromFlags): Command {
  const command = new Command('dashboard')
    .description(
      'serve the web dashboard: queues live with health charts, search, bulk actions, job timelines',
    )
    .option('--port <n>', 'port to listen on', positiveInt, 8080)
    .option('--host <address>', 'address to bind; anything but loopback requires --token', '127.0.0.1')
    .addOption(
      new Option(
        '--token <secret>',
        'access token required on every request (default: a random one, shown once in the URL)',
      ).env('LEASEHOLD_DASHBOARD_TOKEN'),
    )
    .option('--no-token', 'serve loopback without a token (every local user can then act)')
    .option(
      '--allow-host <name>',
      'another Host name to answer to, e.g. behind a proxy (repeatable)',
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .option('--trust-proxy', 'trust X-Forwarded-Proto from a proxy in front (marks the cookie Secure)')
    .addOption(
      new Option(
        '--viewer-token <secret>',
        'a second token for read-only access: every page, no action (needs the operator token)',
      ).env('LEASEHOLD_DASHBOARD_VIEWER_TOKEN'),
    );
  addAdminOptions(command, { json: false });
  command.addHelpText(
    'after',
    `
Replays, cancels and removals (one job or every job a search matches) are recorded in each job's
history with the actor "dashboard"; bulk actions also in the bulk action log. See docs/dashboard.md.

Examples:
  $ leasehold dashboard
    (open the URL it prints once: it carries a fresh token, which a cookie then keeps)
  $ LEASEHOLD_DASHBOARD_TOKEN=$(openssl rand -hex 16) leasehold dashboard --host 0.0.0.0 \\
      --allow-host queue.example.com
    (then open http://queue.example.com:8080/?token=<the token> once; a cookie keeps it)`,
  );
  command.action(async (flags: DashboardFlags) => {
    await withAdminContext(flags, open, async (context) => {
      // A token by default on loopback: another user of this machine can reach it too. Anywhere
      // else the operator must choose one (a secret printed to a log is not one to expose widely).
      const generated =
        flags.token === undefined && isLoopback(flags.host)
          ? randomBytes(24).toString('base64url')
          : undefined;
      const token = generated ?? (flags.token || undefined);
      const dashboard = await startDashboard(context, {
        port: flags.port,
        host: flags.host,
        allowedHosts: flags.allowHost,
        ...(flags.trustProxy && { trustProxy: true }),
        ...(token && { token }),
        ...(flags.viewerToken && { viewerToken: flags.viewerToken }),
      });
      // A generated token is shown once, in the URL to open; a given one is the operator's already.
      note(`dashboard at ${dashboard.url}/${generated ? `?token=${generated}` : ''}`);
      await interrupt.wait();
      await dashboard.close();
    });
  });
  return command;
}
