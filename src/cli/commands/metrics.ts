import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Command, Option } from 'commander';
import { allowedHosts, hostAllowed, isLoopback, sameSecret } from '../../dashboard/security.js';
import { readStats } from '../../operations/queues/stats.js';
import { ValidationError } from '../../shared/errors.js';
import {
  type AdminFlags,
  addAdminOptions,
  contextFromFlags,
  type OpenContext,
  positiveInt,
  printJson,
  withAdminContext,
} from '../admin.js';
import { describeError } from '../errors.js';
import type { Interrupt } from '../interrupt.js';
import { note } from '../log.js';

interface MetricsFlags extends AdminFlags {
  port: number;
  host: string;
  token?: string;
}

/** `leasehold metrics`: serves the database gauges of `lh.stats()` at /metrics for Prometheus. */
export function metricsCommand(interrupt: Interrupt, open: OpenContext = contextFromFlags): Command {
  const command = new Command('metrics')
    .description(
      'serve the queue gauges (pending, running, dead, ages, lost fences) at /metrics for Prometheus',
    )
    .option('--port <n>', 'port to listen on', positiveInt, 9464)
    .option(
      '--host <address>',
      'address to bind (0.0.0.0 for a scraper on another host; anything but loopback requires --token)',
      '127.0.0.1',
    )
    .addOption(
      new Option('--token <secret>', 'bearer token a scrape must send (Authorization: Bearer)').env(
        'LEASEHOLD_METRICS_TOKEN',
      ),
    );
  addAdminOptions(command);
  command.addHelpText(
    'after',
    `
Each scrape reads one bounded, index-served snapshot (lh.stats()); scrape every 15 s or so.
Worker-process metrics (latencies, retries, saturation) come from createWorkerMetrics(worker) in
the worker process itself.

With --json, prints the gauges of one snapshot (lh.stats()) as JSON and exits, serving nothing.

Examples:
  $ leasehold metrics --port 9464
  $ leasehold metrics --json
  $ curl -s localhost:9464/metrics | grep oldest_claimable
  $ LEASEHOLD_METRICS_TOKEN=$(openssl rand -hex 16) leasehold metrics --host 0.0.0.0
    (Prometheus: authorization: { credentials: <the token> } in the scrape config)`,
  );
  command.action(async (flags: MetricsFlags) => {
    if (flags.json) {
      printJson(await withAdminContext(flags, open, (context) => readStats(context.pool, context.schema)));
      return;
    }
    const token = flags.token;
    if (!isLoopback(flags.host) && !token) {
      // Queue names and backlog sizes are not for anyone on the network to read.
      throw new ValidationError('token', `metrics bound to ${flags.host} must require a token (--token)`);
    }
    await withAdminContext(flags, open, async (context) => {
      const { createStatsMetrics } = await importPrometheus();
      const registry = createStatsMetrics(context, {
        onError: (err) => note(`metrics: could not read the queue statistics: ${describeError(err)}`),
      });
      let hosts: ReadonlySet<string> = new Set();
      const server = createServer((req, res) => {
        // A page on a name rebound to this address sends its own Host: refuse it (DNS rebinding).
        if (isLoopback(flags.host) && !hostAllowed(req, hosts)) {
          res.writeHead(421, { 'Content-Type': 'text/plain' }).end('unknown Host\n');
          return;
        }
        const auth = req.headers.authorization;
        if (token && !sameSecret(auth?.startsWith('Bearer ') ? auth.slice(7) : undefined, token)) {
          res.writeHead(401, { 'Content-Type': 'text/plain' }).end('a valid bearer token is required\n');
          return;
        }
        if (req.method !== 'GET' || (req.url ?? '/').split('?')[0] !== '/metrics') {
          res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found; try /metrics\n');
          return;
        }
        registry.metrics().then(
          (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
          (err: unknown) => {
            note(`metrics: ${err instanceof Error ? err.message : String(err)}`);
            res
              .writeHead(503, { 'Content-Type': 'text/plain' })
              .end('could not read the queue statistics (the reason is in the metrics process log)\n');
          },
        );
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(flags.port, flags.host, resolve);
      });
      const { address, port } = server.address() as AddressInfo;
      hosts = allowedHosts(flags.host, port);
      note(`serving metrics at http://${address}:${port}/metrics`);
      await interrupt.wait();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    });
  });
  return command;
}

// prom-client is an optional peer dependency: this command needs it, the rest of the CLI does not.
async function importPrometheus(): Promise<typeof import('../../prometheus.js')> {
  try {
    await import('prom-client');
  } catch (err) {
    throw new Error(
      'leasehold metrics needs prom-client, an optional peer dependency: npm install prom-client',
      { cause: err },
    );
  }
  return import('../../prometheus.js');
}
