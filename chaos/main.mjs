// `npm run chaos`: a Jepsen-style run against the built package. Starts its own PostgreSQL,
// several worker processes and a producer; a nemesis injects faults on a schedule and at random;
// after healing and draining, the checker reads the ledger and the jobs' history and judges.
// See docs/reliability.md for what it proves and a recorded run.

import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { describeEnvironment, formatEnvironment, loadAverage } from '../bench/lib/environment.mjs';
import { Leasehold } from '../dist/index.js';
import { check } from './checker/checker.mjs';
import { checkEvents, eventInvariants, formatEvents } from './checker/events-checker.mjs';
import { checkFlows, flowInvariants } from './checker/flows-checker.mjs';
import { formatReport, invariants } from './checker/report.mjs';
import { checkSteps, formatSteps, stepInvariants } from './checker/steps-checker.mjs';
import { skewRecord } from './faults/faults.mjs';
import { runNemesis } from './faults/nemesis.mjs';
import { batchFacts, batchInvariants } from './harness/batches.mjs';
import { produce } from './harness/producer.mjs';
import {
  formatLimited,
  LIMITED_QUEUE,
  LIMITED_SCHEMA,
  limitedInvariants,
  measureLimited,
  prepareLimitedQueue,
  readLimitedHistory,
} from './harness/rate-limits.mjs';
import { ChaosWorker } from './harness/workers.mjs';
import { parseOptions } from './records/options.mjs';
import { seededRandom } from './records/rng.mjs';
import { drain, reportProgress, saveRecords } from './records/run-records.mjs';
import { createChaosSchema } from './records/schema.mjs';
import { startServer } from './server.mjs';

const options = parseOptions(process.argv.slice(2));
const log = (message) => console.error(`[chaos ${new Date().toISOString().slice(11, 19)}] ${message}`);
const SKEW_MS = 10 * 60_000;
const BACKOFF = { baseMs: 100, maxMs: 2000 };

async function main() {
  const startedAt = performance.now();
  const server = await startServer({ max_connections: '100' });
  const everyWorker = [];
  const ctx = { server, log, acked: [], pin: null, workers: [] };
  let admin = null;
  let lh = null;
  // A last resort: the whole run may take at most this long.
  const watchdog = setTimeout(
    () => {
      console.error('chaos: the run passed its overall time limit; stopping');
      for (const w of everyWorker) w.forceKill();
      server.destroy().finally(() => process.exit(2));
    },
    (options.durationS * 4 + options.drainTimeoutS + options.pinS + 300) * 1000,
  );
  watchdog.unref();
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.once(signal, () => {
      for (const w of everyWorker) w.forceKill();
      server.destroy().finally(() => process.exit(2));
    });
  }
  try {
    admin = new pg.Pool({ connectionString: server.connectionString, max: 3, idleTimeoutMillis: 0 });
    admin.on('error', () => {});
    lh = new Leasehold({ connectionString: server.connectionString, poolSize: 4, backoff: BACKOFF });
    lh.pool.on('error', () => {});
    await lh.migrate();
    await createChaosSchema(admin);
    const limitedSettings = {
      rateMax: options.rateMax,
      ratePerMs: options.ratePerMs,
      concurrency: options.limitedConcurrency,
    };
    if (options.limitedJobs > 0) {
      const lhLimited = new Leasehold({
        connectionString: server.connectionString,
        schema: LIMITED_SCHEMA,
        poolSize: 2,
      });
      try {
        await lhLimited.migrate();
        await prepareLimitedQueue(lhLimited, { jobs: options.limitedJobs, ...limitedSettings });
      } finally {
        await lhLimited.close();
      }
    }
    const env = await describeEnvironment(admin);
    console.log(
      formatEnvironment(env, { embedded: true }).replace('started by the bench', 'started by the harness'),
    );
    console.log(
      `Command: npm run chaos${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    );

    const dbNow = async () => {
      for (let i = 0; ; i++) {
        try {
          return (await admin.query('SELECT clock_timestamp() AS now')).rows[0].now;
        } catch (err) {
          if (i >= 600) throw err;
          await sleep(100);
        }
      }
    };
    const workerConfig = {
      connectionString: server.connectionString,
      concurrency: options.concurrency,
      leaseMs: options.leaseMs,
      pollIntervalMs: 250,
      recoveryIntervalMs: options.sweepMs,
      maxAttempts: options.maxAttempts,
      txnLoops: 2,
      backoff: BACKOFF,
      batchSize: Math.min(options.batchSize, options.concurrency),
      // Each worker could run the whole cap and more: only the queue's limit keeps them within it.
      limited:
        options.limitedJobs > 0
          ? { schema: LIMITED_SCHEMA, queue: LIMITED_QUEUE, concurrency: options.limitedConcurrency + 1 }
          : null,
    };
    let nextLabel = 1;
    const spawn = async (skewMs) => {
      const worker = new ChaosWorker(`w${nextLabel++}`, skewMs);
      everyWorker.push(worker);
      await worker.start(workerConfig);
      ctx.workers.push(worker);
      return worker;
    };
    const skews = Array.from({ length: options.workers }, (_, i) => {
      if (!options.faults.has('skew')) return 0;
      if (i === options.workers - 1) return -SKEW_MS;
      return i === options.workers - 2 ? SKEW_MS : 0;
    });
    for (const skew of skews) await spawn(skew);
    const skewed = ctx.workers.filter((w) => w.skewMs !== 0);

    Object.assign(ctx, {
      admin,
      lh,
      dbNow,
      rng: seededRandom(options.seed * 2 + 1),
      config: {
        leaseMs: options.leaseMs,
        recoveryIntervalMs: options.sweepMs,
        pinMs: options.pinS * 1000,
        gapMs: options.gapMs,
        maxAttempts: options.maxAttempts,
        backoff: BACKOFF,
      },
      // A killed worker is replaced by a new process (a new label), with the same clock.
      replace: async (old) => {
        ctx.workers = ctx.workers.filter((w) => w !== old);
        const replacement = await spawn(old.skewMs);
        if (old.skewMs !== 0) skewed.push(replacement);
        return replacement;
      },
    });
    const runStartedAt = await dbNow();
    log(
      `${options.jobs} jobs over ${options.durationS} s, ${options.workers} workers × ${options.concurrency}, ` +
        `lease ${options.leaseMs} ms, sweep every ${options.sweepMs} ms, faults: ${[...options.faults].join(',')}`,
    );

    let producing = true;
    const progress = setInterval(() => void reportProgress(admin, log), 5000);
    const production = produce({
      lh,
      jobs: options.jobs,
      durationMs: options.durationS * 1000,
      rng: seededRandom(options.seed * 2),
      maxAttempts: options.maxAttempts,
      counterPct: options.counterPct,
      flowPct: options.flowPct,
      steps: options.steps,
      eventPct: options.steps > 0 ? options.eventPct : 0,
      shouldStop: () => false,
      log,
    }).then((result) => {
      producing = false;
      ctx.acked.push(...result.acked);
      log(`production done: ${result.acked.length} jobs acknowledged`);
      return result;
    });
    const nemesis = await runNemesis(ctx, {
      kinds: options.faults,
      productionDone: () => !producing,
      shouldStop: () => false,
    });
    const producer = await production;

    // Heal: every fault heals itself; make sure the server is up, then drain.
    if (!server.running) await server.start();
    log('healed; draining');
    const drained = await drain(
      admin,
      options.drainTimeoutS * 1000,
      options.limitedJobs > 0 ? ['leasehold', LIMITED_SCHEMA] : ['leasehold'],
    );
    clearInterval(progress);
    log(drained ? 'drained; stopping workers' : 'drain timed out; stopping workers');
    const workerFailures = [];
    await Promise.all(
      ctx.workers.map((w) =>
        w.stop(30_000).catch((err) => workerFailures.push(`${w.label}: ${err.message}`)),
      ),
    );
    for (const w of everyWorker) if (w.failure && w.fate !== 'killed') workerFailures.push(w.failure);
    const runEndedAt = await dbNow();

    const records = [...nemesis.records];
    if (skewed.length > 0) records.push(skewRecord(skewed, runStartedAt, runEndedAt));
    await saveRecords(admin, ctx.acked, records);
    log('checking');
    const checkStarted = performance.now();
    const facts = await check(admin, {
      leaseMs: options.leaseMs,
      recoveryIntervalMs: options.sweepMs,
      toleranceMs: options.toleranceMs,
    });
    log(`checked in ${Math.round((performance.now() - checkStarted) / 1000)} s`);
    const run = {
      producer,
      nemesisErrors: nemesis.errors,
      workerFailures,
      requestedKinds: options.faults,
    };
    const rules = invariants(facts, run);
    if (options.limitedJobs > 0) {
      facts.limited = measureLimited(
        await readLimitedHistory(admin, { leaseMs: options.leaseMs }),
        limitedSettings,
      );
      rules.push(...limitedInvariants(facts.limited));
    }
    // Flows (--flow-pct): every child ran after all its parents succeeded, none left stranded.
    if (options.flowPct > 0) {
      facts.flows = await checkFlows(admin);
      rules.push(...flowInvariants(facts.flows));
    }
    // The batch workload (--batch-size): it batched, within the size; as reported by every worker.
    if (options.batchSize > 0) {
      facts.batches = batchFacts(everyWorker);
      rules.push(...batchInvariants(facts.batches, Math.min(options.batchSize, options.concurrency)));
    }
    // The steps workload (--steps): each recorded step ran its effect once, by a current lease.
    if (options.steps > 0) {
      const stepsStarted = performance.now();
      facts.steps = await checkSteps(admin, options.steps);
      rules.push(...stepInvariants(facts.steps));
      log(`steps checked in ${Math.round((performance.now() - stepsStarted) / 1000)} s`);
      // Its waits (--event-pct): each ended woken by its own event or timed out, as its plan allows.
      if (options.eventPct > 0) {
        const eventsStarted = performance.now();
        facts.events = await checkEvents(admin);
        rules.push(...eventInvariants(facts.events, producer.eventsSent));
        log(`events checked in ${Math.round((performance.now() - eventsStarted) / 1000)} s`);
      }
    }
    console.log('');
    console.log(formatReport(facts, rules, run));
    if (facts.limited) console.log(`\n${formatLimited(facts.limited)}`);
    if (facts.steps) console.log(`\n${formatSteps(facts.steps)}`);
    if (facts.events) console.log(`\n${formatEvents(facts.events, producer.eventsSent)}`);
    console.log('');
    console.log(
      `Finished in ${Math.round((performance.now() - startedAt) / 1000)} s; load average at end (1/5/15 min): ${loadAverage()}`,
    );
    if (options.json) {
      writeFileSync(
        options.json,
        JSON.stringify(
          {
            ok: rules.every((r) => r.ok),
            invariants: rules,
            facts,
            producer: { ...producer, acked: undefined },
            nemesisErrors: nemesis.errors,
            workerFailures,
          },
          null,
          2,
        ),
      );
    }
    return rules.every((r) => r.ok) ? 0 : 1;
  } finally {
    clearTimeout(watchdog);
    for (const w of everyWorker) w.forceKill();
    await lh?.close().catch(() => {});
    await admin?.end().catch(() => {});
    await server.destroy();
  }
}

// Waits until no job is pending or running (every acknowledged job has succeeded or died).
function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

main()
  .then((code) => {
    process.exitCode = code;
  })
  .catch((err) => {
    console.error(`chaos failed: ${err?.stack ?? err}`);
    process.exitCode = 2;
  })
  .finally(() => process.exit());
