// The many-hosts harness proper, started by chaos/hosts.mjs inside the database namespace (lhh-db)
// once the network exists. It runs PostgreSQL here (listening on loopback, for the producer and
// the checker, and on each host's database-side address), one relay per host, and the worker
// processes inside their hosts' namespaces, in up to three phases of its own (--phases): fault-free,
// faulted (host 1's link cut, with delay, jitter and loss between cuts) and latency (library
// defaults, host 2 further away, long jobs on a queue only host 2 serves). Then the chaos checker
// and this harness's own measures judge the whole run.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describeEnvironment, formatEnvironment, loadAverage } from '../../bench/lib/environment.mjs';
import { Leasehold } from '../../dist/index.js';
import { check } from '../checker/checker.mjs';
import { formatHosts, hostInvariants, measureHosts } from '../checker/hosts-checks.mjs';
import { formatReport, invariants } from '../checker/report.mjs';
import { startHost } from '../faults/link-faults.mjs';
import { droppedPackets, hostNames, netemAvailable } from '../faults/netns.mjs';
import { startRenewalLog, stopRenewalLog } from '../records/renewal-log.mjs';
import { seededRandom } from '../records/rng.mjs';
import { drain, reportProgress, saveRecords } from '../records/run-records.mjs';
import { createChaosSchema } from '../records/schema.mjs';
import { startServer } from '../server.mjs';
import { produce } from './producer.mjs';
import { ChaosWorker } from './workers.mjs';

const options = JSON.parse(process.env.LHH_HOSTS_OPTIONS ?? '{}');
const argvText = process.env.LHH_HOSTS_ARGV ?? '';
const log = (message) => console.error(`[hosts ${new Date().toISOString().slice(11, 19)}] ${message}`);
const BACKOFF = { baseMs: 100, maxMs: 2000 };
const FAULTY_HOST = 1;
const LATENCY_HOST = 2;
// The latency phase's long jobs go to this queue, which only LATENCY_HOST's workers serve: every
// renewal of theirs then crosses the delayed link (on a shared queue, nearer hosts win the claims).
const FAR_QUEUE = 'chaos_far';
const RTT_PROBE = fileURLToPath(new URL('../faults/rtt-probe.mjs', import.meta.url));

async function main() {
  const startedAt = performance.now();
  const addresses = Array.from({ length: options.hosts }, (_, i) => hostNames(i + 1).dbAddress);
  const server = await startServer(
    {
      max_connections: '300',
      listen_addresses: `'127.0.0.1,${addresses.join(',')}'`,
      // TCP only: a socket file in /tmp could meet another server's on the same port number.
      unix_socket_directories: "''",
    },
    { trustNetworks: ['10.231.0.0/16'] },
  );
  const hosts = [];
  const everyWorker = [];
  let admin = null;
  let lh = null;
  const stopAll = () => {
    for (const w of everyWorker) w.forceKill();
    for (const h of hosts) h.close();
  };
  // `timeout` signals the whole process group, and chaos/hosts.mjs passes SIGTERM on as well: a
  // second signal must not take the default action (death before the server is stopped).
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      log(`${signal}: stopping`);
      stopAll();
      setTimeout(() => process.exit(2), 10_000).unref();
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
    const env = await describeEnvironment(admin);
    console.log(
      formatEnvironment(env, { embedded: true }).replace('started by the bench', 'started by the harness'),
    );
    console.log(`Command: npm run chaos:hosts${argvText ? ` -- ${argvText}` : ''}`);
    for (let i = 1; i <= options.hosts; i++)
      hosts.push(await startHost(i, server.port, options.seed * 31 + i));
    const netem = netemAvailable(1);
    console.log(
      `Delay and jitter: ${netem ? 'tc netem works in this kernel, but ' : 'no netem qdisc in this kernel; '}the harness's relay adds them (chaos/faults/relay.mjs); loss: nftables in each host's namespace.`,
    );
    const dbNow = async () => (await admin.query('SELECT clock_timestamp() AS now')).rows[0].now;
    const rng = seededRandom(options.seed * 2);
    const acked = [];
    const cuts = [];
    const workerFailures = [];
    const producers = [];

    const runPhase = async ({
      name,
      letter,
      jobs,
      libraryDefaults,
      impairments,
      longJobs = 0,
      longJobMs = 0,
      farHost = null,
      faults,
    }) => {
      log(`phase ${name}: ${jobs} jobs${longJobs ? ` + ${longJobs} long` : ''}`);
      for (const h of hosts) await h.impair(impairments[h.index] ?? {});
      const workers = [];
      for (const h of hosts) {
        for (let k = 1; k <= options.workersPerHost; k++) {
          const w = new ChaosWorker(`h${h.index}${letter}w${k}`, 0, { netns: h.ns });
          everyWorker.push(w);
          workers.push({ host: h.index, worker: w });
          await w.start({
            connectionString: h.connectionString,
            concurrency: options.concurrency,
            leaseMs: options.leaseMs,
            pollIntervalMs: 250,
            recoveryIntervalMs: options.sweepMs,
            maxAttempts: options.maxAttempts,
            txnLoops: 2,
            backoff: BACKOFF,
            limited: null,
            libraryDefaults,
            honourSignal: true,
            ...(h.index === farHost && { extraQueue: { name: FAR_QUEUE, concurrency: longJobs } }),
          });
        }
      }
      const phaseStart = await dbNow();
      const t0 = performance.now();
      let producing = true;
      const progress = setInterval(() => void reportProgress(admin, log), 10_000);
      const production = produce({
        lh,
        jobs,
        durationMs: options.produceS * 1000,
        rng,
        maxAttempts: options.maxAttempts,
        counterPct: 0,
        flowPct: 0,
        shouldStop: () => false,
        log,
      }).then((result) => {
        producing = false;
        acked.push(...result.acked);
        return result;
      });
      if (longJobs > 0) {
        const queue = farHost ? FAR_QUEUE : 'chaos';
        const { ids } = await lh.enqueueMany(
          queue,
          Array.from({ length: longJobs }, () => ({
            payload: { mode: 'plain', workMs: longJobMs },
            maxAttempts: options.maxAttempts,
          })),
        );
        for (const id of ids) acked.push({ id, queue, mode: 'plain', delayMs: 0 });
      }
      if (faults) await faults({ workers, producing: () => producing });
      const producer = await production;
      producers.push(producer);
      log(`phase ${name}: ${producer.acked.length} jobs acknowledged; draining`);
      const drained = await drain(admin, options.drainTimeoutS * 1000);
      clearInterval(progress);
      if (!drained) log(`phase ${name}: drain timed out`);
      await Promise.all(
        workers.map(({ worker }) =>
          worker.stop(30_000).catch((err) => workerFailures.push(`${worker.label}: ${err.message}`)),
        ),
      );
      for (const { worker } of workers) if (worker.failure) workerFailures.push(worker.failure);
      const dropped = Object.fromEntries(hosts.map((h) => [h.index, droppedPackets(h.index)]));
      for (const h of hosts) await h.impair({});
      const phaseEnd = await dbNow();
      return {
        name,
        letter,
        jobs: jobs + longJobs,
        drained,
        startedAt: phaseStart,
        endedAt: phaseEnd,
        seconds: (performance.now() - t0) / 1000,
        longJobMs,
        longJobs,
        impairments,
        dropped,
      };
    };

    const phases = [];
    const wanted = (name) => options.phases.includes(name);
    if (wanted('fault-free'))
      phases.push(await runPhase({ name: 'fault-free', letter: 'b', jobs: options.jobs, impairments: {} }));
    const faultyImpairment = {
      rttMs: options.faultyRttMs,
      jitterMs: options.faultyJitterMs,
      lossPct: options.faultyLossPct,
    };
    if (wanted('faulted'))
      phases.push(
        await runPhase({
          name: 'faulted',
          letter: 'f',
          jobs: options.jobs,
          impairments: { [FAULTY_HOST]: { ...faultyImpairment, cuts: options.cuts, cutMs: options.cutMs } },
          faults: async ({ workers }) => {
            const host = hosts[FAULTY_HOST - 1];
            const labels = workers.filter((w) => w.host === FAULTY_HOST).map((w) => w.worker.label);
            for (let n = 0; n < options.cuts; n++) {
              await sleep(n === 0 ? 4000 : options.cutGapMs);
              const injectedAt = await dbNow();
              host.cut();
              log(`cut host ${FAULTY_HOST}'s link for ${options.cutMs} ms (${n + 1}/${options.cuts})`);
              await sleep(options.cutMs);
              host.restore();
              const healedAt = await dbNow();
              cuts.push({
                host: FAULTY_HOST,
                phase: 'f',
                injectedAt,
                healedAt,
                leaseMs: options.leaseMs,
                labels,
              });
            }
          },
        }),
      );
    const rtt = {};
    if (wanted('latency')) {
      await startRenewalLog(admin);
      phases.push(
        await runPhase({
          name: 'latency',
          letter: 'l',
          jobs: Math.max(1, options.latencyJobs),
          longJobs: options.longJobs,
          longJobMs: options.longJobS * 1000,
          farHost: LATENCY_HOST,
          libraryDefaults: true,
          impairments: { [LATENCY_HOST]: { rttMs: options.latencyRttMs } },
          // While the long jobs run: the round trip as a client on the delayed host sees it,
          // beside one on an undelayed host.
          faults: async () => {
            await sleep(15_000);
            for (const i of [LATENCY_HOST, LATENCY_HOST === 1 ? 2 : 1]) {
              const host = hosts[i - 1];
              rtt[i] = await probeRtt(host.ns, host.connectionString).catch((err) => ({
                error: err.message,
              }));
              log(`round trip from host ${i}: ${JSON.stringify(rtt[i])}`);
            }
          },
        }),
      );
      await stopRenewalLog(admin);
    }

    const records = cuts.flatMap((c) =>
      c.labels.map((label) => ({
        kind: 'partition',
        target: label,
        injectedAt: c.injectedAt,
        healedAt: c.healedAt,
        detail: { host: c.host, cutMs: options.cutMs },
      })),
    );
    await saveRecords(admin, acked, records);
    log('checking');
    const facts = await check(admin, {
      leaseMs: options.leaseMs,
      recoveryIntervalMs: options.sweepMs,
      toleranceMs: options.toleranceMs,
    });
    const producer = {
      errors: {
        total: producers.reduce((n, p) => n + p.errors.total, 0),
        untyped: producers.reduce((n, p) => n + p.errors.untyped, 0),
      },
      slowestMs: Math.max(0, ...producers.map((p) => p.slowestMs)),
    };
    const run = {
      producer,
      nemesisErrors: [],
      workerFailures,
      requestedKinds: new Set(wanted('faulted') ? ['partition'] : []),
    };
    const rules = invariants(facts, run);
    const measures = await measureHosts(admin, {
      phases,
      cuts,
      latencyHost: LATENCY_HOST,
      farQueue: FAR_QUEUE,
    });
    measures.rtt = rtt;
    const healthyHosts = hosts.map((h) => h.index).filter((i) => i !== FAULTY_HOST);
    rules.push(
      ...hostInvariants(measures, {
        healthyHosts,
        minThroughputPct: options.minThroughputPct,
        phases: options.phases,
      }),
    );
    const undrained = phases.filter((p) => !p.drained).map((p) => p.name);
    rules.push({
      name: 'phases that did not drain',
      value: undrained.join(', ') || 0,
      bound: 'none',
      ok: undrained.length === 0,
    });
    console.log('');
    console.log(formatReport(facts, rules, run));
    console.log('');
    console.log(formatHosts(measures, phases));
    const faulted = phases.find((p) => p.name === 'faulted');
    if (faulted)
      console.log(
        `\nPackets dropped by nft on host ${FAULTY_HOST} in the faulted phase: ${faulted.dropped[FAULTY_HOST]}.`,
      );
    console.log(
      `\nFinished in ${Math.round((performance.now() - startedAt) / 1000)} s; load average at end (1/5/15 min): ${loadAverage()}`,
    );
    const ok = rules.every((r) => r.ok);
    if (options.json) {
      writeFileSync(
        options.json,
        JSON.stringify(
          { ok, invariants: rules, facts, hosts: measures, phases, netem, producer, workerFailures },
          null,
          2,
        ),
      );
    }
    return ok ? 0 : 1;
  } finally {
    stopAll();
    await lh?.close().catch(() => {});
    await admin?.end().catch(() => {});
    await server.destroy();
  }
}

// Waits until no job is pending or running.
// Runs chaos/faults/rtt-probe.mjs inside namespace `ns`; resolves with its JSON answer.
function probeRtt(ns, connectionString) {
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, RTT_PROBE, connectionString, '50'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    child.stderr.on('data', (chunk) => {
      err += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(JSON.parse(out));
      else reject(new Error(`rtt probe in ${ns} failed (${code}): ${err.trim()}`));
    });
  });
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

main()
  .then((code) => {
    process.exitCode = code;
  })
  .catch((err) => {
    console.error(`chaos:hosts failed: ${err?.stack ?? err}`);
    process.exitCode = 2;
  })
  .finally(() => process.exit());
