import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Command } from 'commander';
import { createStatsMetrics } from '../../index.js';
import { type AdminFlags, addAdminOptions, positiveInt, withAdminClient } from '../admin.js';
import { describeError } from '../errors.js';
import type { Interrupt } from '../interrupt.js';
import { note } from '../log.js';

interface MetricsFlags extends AdminFlags {
  port: number;
  host: string;
}

/** `leasehold metrics`: serves the database gauges of `lh.stats()` at /metrics for Prometheus. */
export function metricsCommand(interrupt: Interrupt): Command {
  const command = new Command('metrics')
    .description(
      'serve the queue gauges (pending, running, dead, ages, lost fences) at /metrics for Prometheus',
    )
    .option('--port <n>', 'port to listen on', positiveInt, 9464)
    .option('--host <address>', 'address to bind (0.0.0.0 for a scraper on another host)', '127.0.0.1');
  addAdminOptions(command, { json: false });
  command.addHelpText(
    'after',
    `
Each scrape reads one bounded, index-served snapshot (lh.stats()); scrape every 15 s or so.
Worker-process metrics (latencies, retries, saturation) come from createWorkerMetrics(worker) in
the worker process itself.

Examples:
  $ leasehold metrics --port 9464
  $ curl -s localhost:9464/metrics | grep oldest_claimable`,
  );
  command.action(async (flags: MetricsFlags) => {
    await withAdminClient(flags, async (lh) => {
      const registry = createStatsMetrics(lh, {
        onError: (err) => note(`metrics: could not read the queue statistics: ${describeError(err)}`),
      });
      const server = createServer((req, res) => {
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
