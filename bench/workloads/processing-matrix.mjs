// Workload 3 across systems and process counts: Leasehold (at its defaults, and with prefetch), the
// raw baseline (the best hand-written batched SQL) and graphile-worker's tuned profile always (a dev
// dependency; a row says so when it cannot load); with --peers, pg-boss too. Repetitions interleave the
// systems, so a drifting machine (a neighbour's load, a checkpoint) spreads over all of them.

import { summarize } from '../lib/stats.mjs';
import { loadSystem } from './processing/systems.mjs';
import { measureProcessing } from './processing.mjs';

const PROCESS_COUNTS = [1, 2];
const PEER_KEYS = ['graphile', 'pgboss'];
// Peers that run without --peers: graphile-worker is the batched PostgreSQL queue to beat (issue 28).
const DEFAULT_PEERS = ['graphile'];
// Without these the table has nothing to compare: their failure fails the bench.
const REQUIRED_KEYS = ['leasehold', 'raw'];

export async function measureProcessingMatrix(ctx, options, log) {
  const keys = [
    'leasehold',
    ...(options.prefetch > 0 ? ['leasehold-prefetch'] : []),
    // Issue 28: every feature present in the schema, used by other queues only: within 5% of defaults.
    'leasehold-features',
    'raw',
    ...(options.peers ? PEER_KEYS : DEFAULT_PEERS),
  ];
  const systems = {};
  const unavailable = {};
  for (const key of keys) {
    const system = await loadSystem(key);
    systems[key] = system;
    const reason = await system.available();
    if (reason) {
      unavailable[key] = reason;
      log(`${system.label}: skipped: ${reason}`);
      continue;
    }
    try {
      await system.setup(ctx);
    } catch (err) {
      if (REQUIRED_KEYS.includes(key)) throw err;
      unavailable[key] = `setup failed: ${err.message}`;
      log(`${system.label}: setup failed: ${err.stack}`);
    }
  }

  const results = {}; // key -> processes -> [jobs/s]
  for (let rep = 0; rep < options.reps; rep++) {
    for (const processes of PROCESS_COUNTS) {
      for (const key of keys) {
        if (unavailable[key]) continue;
        const what = `process ${options.processJobs} jobs: ${systems[key].label}, ${processes} process(es) × ${options.concurrency}, run ${rep + 1}/${options.reps}`;
        try {
          const r = await measureProcessing({
            systemKey: key,
            processes,
            jobs: options.processJobs,
            ctx,
            options,
            rep,
          });
          const errors = r.errorCount ? ` (${r.errorCount} worker errors, first: ${r.errors[0]})` : '';
          log(`${what}: ${Math.round(r.jobsPerSec)} jobs/s in ${r.seconds.toFixed(2)} s${errors}`);
          recordRun(results, key, processes, r.jobsPerSec);
        } catch (err) {
          if (REQUIRED_KEYS.includes(key)) throw err;
          unavailable[key] = `failed: ${err.message}`;
          log(`${what}: failed: ${err.stack}`);
        }
      }
    }
  }
  // Peers' schemas go now; Leasehold's and the baseline's serve the later workloads too.
  for (const key of PEER_KEYS) {
    if (systems[key] && !unavailable[key]) await systems[key].teardown(ctx).catch(() => {});
  }

  const jobsText = `${options.processJobs} no-op jobs`;
  const shape = (processes) =>
    `${processes} process${processes > 1 ? 'es' : ''} × concurrency ${options.concurrency}`;
  const summary = (key, processes) => summarize(results[key][processes]);
  const rows = [];
  const raw = `hand-written SQL (a claimer per process buffering ${options.rawClaimBatch}, ${options.concurrency} slots, one fenced unnest() completion per flush)`;
  const leaseholdVariants = [['leasehold', 'Leasehold defaults']];
  if (keys.includes('leasehold-prefetch')) {
    leaseholdVariants.push(['leasehold-prefetch', `Leasehold prefetch ${options.prefetch}`]);
  }
  for (const [key, name] of leaseholdVariants) {
    for (const processes of PROCESS_COUNTS) {
      const workload = `Process ${jobsText}, ${shape(processes)}: ${name}`;
      if (unavailable[key]) {
        rows.push({ workload, theirsLabel: raw, kind: 'unavailable', reason: unavailable[key] });
      } else {
        rows.push({
          workload,
          ours: summary(key, processes),
          theirsLabel: raw,
          theirs: summary('raw', processes),
          kind: 'throughput',
        });
      }
    }
  }
  // Leasehold beside every feature another queue uses, against Leasehold on a schema without them.
  for (const processes of PROCESS_COUNTS) {
    const workload = `Process ${jobsText}, ${shape(processes)}: Leasehold defaults, every feature used by other queues`;
    const theirsLabel = 'Leasehold defaults (no other queue)';
    if (unavailable['leasehold-features']) {
      rows.push({ workload, theirsLabel, kind: 'unavailable', reason: unavailable['leasehold-features'] });
    } else {
      rows.push({
        workload,
        ours: summary('leasehold-features', processes),
        theirsLabel,
        theirs: summary('leasehold', processes),
        kind: 'throughput',
      });
    }
  }
  // Peers (at their batched, tuned settings) are compared with Leasehold at its defaults: what a
  // user gets without tuning.
  const [oursKey, oursName] = leaseholdVariants[0];
  for (const key of keys.filter((k) => PEER_KEYS.includes(k))) {
    for (const processes of PROCESS_COUNTS) {
      const workload = `Process ${jobsText}, ${shape(processes)}: ${oursName} vs peer`;
      const theirsLabel = `${systems[key].label} (${systems[key].settingsNote})`;
      const ours = summary(oursKey, processes);
      if (unavailable[key]) {
        rows.push({ workload, ours, theirsLabel, kind: 'unavailable', reason: unavailable[key] });
      } else {
        rows.push({ workload, ours, theirsLabel, theirs: summary(key, processes), kind: 'throughput' });
      }
    }
  }
  return rows;
}

function recordRun(results, key, processes, jobsPerSec) {
  results[key] ??= {};
  results[key][processes] ??= [];
  results[key][processes].push(jobsPerSec);
}
