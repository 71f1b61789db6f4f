// `npm run chaos:failover -- --mode sync|async`: a primary, a streaming standby and a third small
// server for the ledger. Producers and chaos worker processes reach the queue through the host
// list with target_session_attrs=read-write. Mid-run the primary is SIGKILLed with every process,
// the standby promoted, the workers move, the queue drains; the ledger is copied to the new primary,
// split into what it knows and what was lost with the old one (failover-timeline.mjs), and judged
// by the chaos checker. See docs/reliability.md, "Failover to a streaming standby".
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { describeEnvironment, formatEnvironment, loadAverage } from '../bench/lib/environment.mjs';
import { Leasehold } from '../dist/index.js';
import { check } from './checker/checker.mjs';
import { adjustForMode, failoverInvariants, formatFailover } from './checker/failover-report.mjs';
import { copyLedger, splitTimeline } from './checker/failover-timeline.mjs';
import { formatReport, invariants } from './checker/report.mjs';
import { produce } from './harness/producer.mjs';
import { ChaosWorker } from './harness/workers.mjs';
import { parseFailoverOptions } from './records/failover-options.mjs';
import { seededRandom } from './records/rng.mjs';
import { drain } from './records/run-records.mjs';
import { createChaosSchema } from './records/schema.mjs';
import { startServer, startStandby } from './server.mjs';

const options = parseFailoverOptions(process.argv.slice(2));
const log = (message) => console.error(`[failover ${new Date().toISOString().slice(11, 19)}] ${message}`);
const BACKOFF = { baseMs: 100, maxMs: 2000 };
const STANDBY_NAME = 'failover_standby';

async function main() {
  const startedAt = performance.now();
  const servers = [];
  const workers = [];
  const pools = [];
  let lh = null;
  const cleanup = async () => {
    for (const w of workers) w.forceKill();
    await lh?.close().catch(() => {});
    for (const pool of pools) await pool.end().catch(() => {});
    for (const server of servers) await server.destroy('immediate').catch(() => {});
  };
  const watchdog = setTimeout(
    () => {
      console.error('chaos:failover: the run passed its overall time limit; stopping');
      cleanup().finally(() => process.exit(2));
    },
    (options.durationS * 4 + options.drainTimeoutS + 600) * 1000,
  );
  watchdog.unref();
  for (const signal of ['SIGINT', 'SIGTERM'])
    process.once(signal, () => cleanup().finally(() => process.exit(2)));
  const pool = (connectionString) => {
    const p = new pg.Pool({ connectionString, max: 3, idleTimeoutMillis: 0 });
    p.on('error', () => {});
    pools.push(p);
    return p;
  };
  try {
    const ledgerServer = await startServer({ max_connections: '60' }, { tempPrefix: 'leasehold-ledger-pg-' });
    servers.push(ledgerServer);
    const primary = await startServer(
      {
        max_connections: '100',
        wal_level: 'replica',
        wal_keep_size: "'2GB'", // the standby connects after the copy: keep its WAL till then
        synchronous_commit: 'on',
        // Named once the standby streams (below): until then every commit would wait for it.
        synchronous_standby_names: "''",
      },
      { tempPrefix: 'leasehold-primary-pg-' },
    );
    servers.push(primary);
    const setup = new Leasehold({ connectionString: primary.connectionString, poolSize: 2 });
    await setup.migrate();
    await setup.close();
    const primaryAdmin = pool(primary.connectionString);
    await createChaosSchema(primaryAdmin); // counters and txn_effects commit with the jobs, here
    await primaryAdmin.end();
    pools.splice(pools.indexOf(primaryAdmin), 1);
    // The copy carries the primary's synchronous_standby_names, as an operator's copy does.
    const syncNames = options.mode === 'sync' ? `'${STANDBY_NAME}'` : "''";
    const standby = await startStandby(primary, {
      name: STANDBY_NAME,
      settings: { synchronous_standby_names: syncNames },
    });
    servers.push(standby);
    const ledger = pool(ledgerServer.connectionString);
    await createChaosSchema(ledger);
    const oldAdmin = pool(primary.connectionString);
    let replication = await waitStreaming(oldAdmin);
    if (options.mode === 'sync') {
      await oldAdmin.query(`ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
      await oldAdmin.query('SELECT pg_reload_conf()');
      replication = await waitStreaming(oldAdmin, 'sync');
    }
    log(`standby ${replication.application_name} ${replication.state}, sync_state ${replication.sync_state}`);
    console.log(
      formatEnvironment(await describeEnvironment(oldAdmin), { embedded: true }).replace(
        'started by the bench',
        'started by the rig',
      ),
    );
    console.log(`Command: npm run chaos:failover -- ${process.argv.slice(2).join(' ')}`);

    const hostList = `postgres://postgres@127.0.0.1:${primary.port},127.0.0.1:${standby.port}/postgres?target_session_attrs=read-write`;
    lh = new Leasehold({ connectionString: hostList, poolSize: 4, backoff: BACKOFF, connectTimeoutMs: 3000 });
    lh.pool.on('error', () => {});
    const workerConfig = {
      connectionString: hostList,
      hostList: true,
      ledgerConnectionString: ledgerServer.connectionString,
      concurrency: options.concurrency,
      leaseMs: options.leaseMs,
      pollIntervalMs: 250,
      recoveryIntervalMs: options.sweepMs,
      maxAttempts: options.maxAttempts,
      txnLoops: 2,
      backoff: BACKOFF,
      limited: null,
    };
    for (let i = 1; i <= options.workers; i++) {
      const worker = new ChaosWorker(`w${i}`, 0);
      workers.push(worker);
      await worker.start(workerConfig);
    }
    log(
      `${options.mode}: ${options.jobs} jobs over ${options.durationS} s, ${options.workers} workers × ` +
        `${options.concurrency}, lease ${options.leaseMs} ms; the primary dies after ${options.killAfter} completions`,
    );

    const production = produce({
      lh,
      jobs: options.jobs,
      durationMs: options.durationS * 1000,
      rng: seededRandom(options.seed * 2),
      maxAttempts: options.maxAttempts,
      counterPct: options.counterPct,
      shouldStop: () => false,
      log,
    });
    const lagSamples = [];
    const sampler = setInterval(() => {
      sampleLag(oldAdmin).then((s) => s && lagSamples.push(s));
    }, 1000);
    while ((await completions(ledger)) < options.killAfter) await sleep(100);
    clearInterval(sampler);

    // The failover, timed as an operator's script would run it.
    const atKill = await sampleLag(oldAdmin);
    const killStarted = new Date();
    const processesKilled = await primary.kill();
    const killed = new Date();
    await oldAdmin.end();
    pools.splice(pools.indexOf(oldAdmin), 1);
    await standby.promote();
    const promotedAt = new Date();
    const admin = pool(standby.connectionString);
    let clearedAt = null;
    if (options.mode === 'sync') {
      // The promoted copy still names itself as its synchronous standby: every commit would wait.
      await admin.query(`ALTER SYSTEM SET synchronous_standby_names = ''`);
      await admin.query('SELECT pg_reload_conf()');
      clearedAt = new Date();
    }
    const listenersMs = await listenersBack(admin, options.workers, 60_000);
    const healedAt = new Date();
    log(
      `primary killed (${processesKilled} processes) at ${completionsAtKill(atKill)}; promoted after ` +
        `${promotedAt - killStarted} ms; listeners back ${listenersMs} ms later`,
    );

    const producer = await production;
    log(`production done: ${producer.acked.length} enqueues acknowledged; draining`);
    const drained = await drain(admin, options.drainTimeoutS * 1000);
    log(drained ? 'drained; stopping workers' : 'drain timed out; stopping workers');
    const workerFailures = [];
    await Promise.all(
      workers.map((w) => w.stop(30_000).catch((err) => workerFailures.push(`${w.label}: ${err.message}`))),
    );
    for (const w of workers) if (w.failure) workerFailures.push(w.failure);

    const copied = await copyLedger(ledger, admin);
    const fault = {
      kind: 'failover',
      target: 'all',
      injectedAt: killStarted,
      healedAt,
      detail: {
        processesKilled,
        killToPromotedMs: promotedAt - killStarted,
        listenersReconnectedMs: listenersMs,
      },
    };
    const timeline = await splitTimeline(admin, { acked: producer.acked, fault, promotedAt });
    log('checking');
    const facts = await check(admin, {
      leaseMs: options.leaseMs,
      recoveryIntervalMs: options.sweepMs,
      toleranceMs: options.toleranceMs,
    });
    const firstCompletion = await admin.query(
      'SELECT min(finished_at) AS at FROM leasehold.finished_jobs WHERE finished_at > $1',
      [promotedAt],
    );
    const failover = {
      mode: options.mode,
      killAfter: options.killAfter,
      processesKilled,
      killMs: killed - killStarted,
      killToPromotedMs: promotedAt - killStarted,
      promotedToClearedMs: clearedAt ? clearedAt - promotedAt : null,
      listenersBackMs: listenersMs,
      firstCompletionAfterPromotionMs:
        firstCompletion.rows[0].at === null ? null : firstCompletion.rows[0].at - promotedAt,
      lagAtKill: atKill,
      lagSamples: summarizeLag(lagSamples),
      killStarted,
      promotedAt,
      copied,
      timeline,
      drained,
    };
    const run = { producer, nemesisErrors: [], workerFailures, requestedKinds: new Set(['failover']) };
    const rules = [
      ...adjustForMode(invariants(facts, run), failover, options),
      ...failoverInvariants(failover, options),
    ];
    console.log('');
    console.log(formatFailover(failover, rules, options));
    console.log('');
    console.log(formatReport(facts, rules, run));
    console.log('');
    console.log(
      `Finished in ${Math.round((performance.now() - startedAt) / 1000)} s; load average at end (1/5/15 min): ${loadAverage()}`,
    );
    const ok = rules.every((r) => r.ok);
    if (options.json) {
      writeFileSync(
        options.json,
        JSON.stringify(
          {
            ok,
            options,
            invariants: rules,
            failover,
            facts,
            producer: { ...producer, acked: undefined },
            workerFailures,
          },
          null,
          2,
        ),
      );
    }
    return ok ? 0 : 1;
  } finally {
    clearTimeout(watchdog);
    await cleanup();
  }
}

// Waits until the primary lists the standby as streaming (and, given, in that sync_state).
async function waitStreaming(admin, syncState = null) {
  for (let i = 0; i < 600; i++) {
    const { rows } = await admin.query('SELECT application_name, state, sync_state FROM pg_stat_replication');
    if (rows[0]?.state === 'streaming' && (syncState === null || rows[0].sync_state === syncState))
      return rows[0];
    await sleep(100);
  }
  throw new Error('the standby never started streaming');
}

// How far the standby is behind, as the primary sees it (bytes and pg's own lag times).
async function sampleLag(admin) {
  const { rows } = await admin
    .query(
      `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)::float8 AS flush_bytes,
              pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::float8 AS replay_bytes,
              extract(epoch FROM flush_lag) * 1000 AS flush_lag_ms,
              extract(epoch FROM replay_lag) * 1000 AS replay_lag_ms
       FROM pg_stat_replication`,
    )
    .catch(() => ({ rows: [] }));
  return rows[0] ?? null;
}

function summarizeLag(samples) {
  const pick = (key) => samples.map((s) => Number(s[key] ?? 0)).sort((a, b) => a - b);
  const stats = (values) =>
    values.length === 0
      ? null
      : { median: values[Math.floor(values.length / 2)], max: values[values.length - 1] };
  return {
    samples: samples.length,
    replayBytes: stats(pick('replay_bytes')),
    flushLagMs: stats(pick('flush_lag_ms')),
    replayLagMs: stats(pick('replay_lag_ms')),
  };
}

function completionsAtKill(lag) {
  return lag
    ? `flush lag ${Math.round(lag.flush_bytes)} B, replay lag ${Math.round(lag.replay_bytes)} B`
    : 'lag unknown';
}

async function completions(ledger) {
  const { rows } = await ledger.query(`SELECT count(*)::int AS n FROM chaos.acks WHERE result = 'completed'`);
  return rows[0].n;
}

// Every worker's listener connected to the new primary; how long after the call that took.
async function listenersBack(admin, expected, timeoutMs) {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    const { rows } = await admin
      .query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'leasehold-listener'`)
      .catch(() => ({ rows: [{ n: -1 }] }));
    if (rows[0].n >= expected) return Math.round(performance.now() - started);
    await sleep(20);
  }
  return null;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

main()
  .then((code) => {
    process.exitCode = code;
  })
  .catch((err) => {
    console.error(`chaos:failover failed: ${err?.stack ?? err}`);
    process.exitCode = 2;
  })
  .finally(() => process.exit());
