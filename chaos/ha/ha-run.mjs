// The high-availability rig itself, run by chaos/ha.mjs inside the `ctl` namespace once the network
// exists: the ledger's PostgreSQL (outside the cluster), the cluster under its manager, the
// producer here and a chaos worker process per worker host, all on the multi-host URL with
// target_session_attrs=read-write (docs/operations.md); then the failovers (ha-failovers.mjs), the
// drain, the ledger copied to the last primary and split (failover-timeline.mjs), and the checker.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { Leasehold } from '../../dist/index.js';
import { check } from '../checker/checker.mjs';
import { adjustForMode } from '../checker/failover-report.mjs';
import { copyLedger, splitTimeline } from '../checker/failover-timeline.mjs';
import { formatReport, invariants } from '../checker/report.mjs';
import { produce } from '../harness/producer.mjs';
import { ChaosWorker } from '../harness/workers.mjs';
import { seededRandom } from '../records/rng.mjs';
import { drain } from '../records/run-records.mjs';
import { createChaosSchema } from '../records/schema.mjs';
import { startServer } from '../server.mjs';
import { pgAutoFailover } from './ha-autofailover.mjs';
import { healthy, primaries, runFailovers } from './ha-failovers.mjs';
import { addressOf, nsOf } from './ha-net.mjs';
import { parseHaOptions } from './ha-options.mjs';
import { PG_PORT, patroni } from './ha-patroni.mjs';
import { haInvariants, haSummary } from './ha-report.mjs';

const options = parseHaOptions(process.argv.slice(2));
const log = (message) => console.error(`[ha ${new Date().toISOString().slice(11, 19)}] ${message}`);
const BACKOFF = { baseMs: 100, maxMs: 2000 };
const ROOT = '/tmp/leasehold-ha';
const NODES = ['pg1', 'pg2', 'pg3'];

async function main() {
  const startedAt = performance.now();
  rmSync(ROOT, { recursive: true, force: true });
  mkdirSync(ROOT);
  chmodSync(ROOT, 0o755);
  const user = {
    name: 'postgres',
    uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
    gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
  };
  const manager =
    options.manager === 'patroni'
      ? patroni({ root: ROOT, nodes: NODES, mode: options.mode, lagBytes: options.lagBytes, user, log })
      : pgAutoFailover({ root: ROOT, nodes: NODES, mode: options.mode, user, log });
  const workers = [];
  const pools = [];
  let ledgerServer = null;
  let lh = null;
  const cleanup = async () => {
    for (const w of workers) w.forceKill();
    await lh?.close().catch(() => {});
    for (const pool of pools) await pool.end().catch(() => {});
    manager.stop();
    await ledgerServer?.destroy('immediate').catch(() => {});
  };
  for (const signal of ['SIGINT', 'SIGTERM'])
    process.once(signal, () => cleanup().finally(() => process.exit(2)));
  const pool = (connectionString, max = 3) => {
    const p = new pg.Pool({ connectionString, max, idleTimeoutMillis: 0 });
    p.on('error', () => {});
    pools.push(p);
    return p;
  };
  try {
    ledgerServer = await startServer(
      {
        max_connections: '100',
        listen_addresses: `'127.0.0.1,${addressOf('ctl')}'`,
        unix_socket_directories: "''",
      },
      { trustNetworks: ['10.232.0.0/24'], tempPrefix: 'leasehold-ha-ledger-' },
    );
    const ledgerUrl = `postgres://postgres@${addressOf('ctl')}:${ledgerServer.port}/postgres`;
    const ledger = pool(ledgerUrl);
    await createChaosSchema(ledger);
    log(`${options.manager} (${options.mode}): starting etcd or the monitor and three nodes`);
    const clusterStarted = performance.now();
    await manager.start();
    // Up means a primary and both standbys streaming from it (sync: one of them synchronously).
    if ((await healthy(NODES, options.mode, 600_000)) === null)
      throw new Error('the cluster never became healthy');
    log(`cluster up in ${Math.round(performance.now() - clusterStarted)} ms`);

    // Exactly what docs/operations.md tells users: every node, the session must accept writes.
    const hostList = `postgres://postgres@${NODES.map((n) => `${addressOf(n)}:${PG_PORT}`).join(',')}/postgres?target_session_attrs=read-write`;
    lh = new Leasehold({ connectionString: hostList, poolSize: 4, backoff: BACKOFF, connectTimeoutMs: 3000 });
    lh.pool.on('error', () => {});
    await lh.migrate();
    // The ledger tables that commit with the jobs (counters, txn_effects) live in the cluster: made
    // on the primary (pg takes no host list; Leasehold does).
    const [first] = await primaries(NODES);
    const setup = pool(`postgres://postgres@${addressOf(first)}:${PG_PORT}/postgres`, 1);
    await createChaosSchema(setup);
    const workerConfig = {
      connectionString: hostList,
      hostList: true,
      ledgerConnectionString: ledgerUrl,
      concurrency: options.concurrency,
      leaseMs: options.leaseMs,
      pollIntervalMs: 250,
      recoveryIntervalMs: options.sweepMs,
      maxAttempts: options.maxAttempts,
      txnLoops: 2,
      backoff: BACKOFF,
      limited: null,
      // As in the many-hosts harness: links are cut here, so handlers and manual claimers honour
      // their leases (stop waiting on the network once the lease could have lapsed), as a user's
      // must for the overlap bound to hold.
      honourSignal: true,
    };
    for (let i = 1; i <= options.workerHosts; i++) {
      const worker = new ChaosWorker(`w${i}`, 0, { netns: nsOf(`w${i}`) });
      workers.push(worker);
      await worker.start(workerConfig, 60_000);
    }
    log(
      `${options.jobs} jobs over ${options.durationS} s, ${options.workerHosts} worker hosts × ${options.concurrency}, ` +
        `lease ${options.leaseMs} ms, ${options.failovers} failovers`,
    );
    // --jobs over --duration-s, then, while failovers are still to come, more at the same rate in
    // slices of 10 s: every failover happens under load, so each has a first completion to time.
    let failoversDone = false;
    const rng = seededRandom(options.seed * 2);
    const production = (async () => {
      const slice = (jobs, durationMs) =>
        produce({
          lh,
          jobs,
          durationMs,
          rng,
          maxAttempts: options.maxAttempts,
          counterPct: options.counterPct,
          shouldStop: () => false,
          log,
        });
      const total = await slice(options.jobs, options.durationS * 1000);
      const perSlice = Math.max(1, Math.round((options.jobs / options.durationS) * 10));
      while (!failoversDone) {
        const more = await slice(perSlice, 10_000);
        total.acked.push(...more.acked);
        total.errors.total += more.errors.total;
        total.errors.untyped += more.errors.untyped;
        total.slowestMs = Math.max(total.slowestMs, more.slowestMs);
      }
      return total;
    })();
    const { records, faults } = await runFailovers({
      manager,
      nodes: NODES,
      options,
      ledger,
      log,
      productionDone: () => false,
    }).finally(() => {
      failoversDone = true;
    });
    const producer = await production;
    log(`production done: ${producer.acked.length} enqueues acknowledged; draining`);
    const last = records.at(-1);
    const admin = pool(`postgres://postgres@${addressOf(last.promoted)}:${PG_PORT}/postgres`);
    const drained = await drain(admin, options.drainTimeoutS * 1000);
    log(drained ? 'drained; stopping workers' : 'drain timed out; stopping workers');
    const workerFailures = [];
    await Promise.all(
      workers.map((w) => w.stop(30_000).catch((err) => workerFailures.push(`${w.label}: ${err.message}`))),
    );
    for (const w of workers) if (w.failure) workerFailures.push(w.failure);

    const copied = await copyLedger(ledger, admin);
    // What the last primary cannot know is moved aside; enqueues are split at the last promotion.
    const timeline = await splitTimeline(admin, {
      acked: producer.acked,
      fault: faults[0],
      promotedAt: last.promotedAt,
    });
    for (const [i, f] of faults.slice(1).entries()) {
      await admin.query(
        'INSERT INTO chaos.faults (id, kind, target, injected_at, healed_at, detail) VALUES ($1, $2, $3, $4, $5, $6)',
        [i + 2, f.kind, f.target, f.injectedAt, f.healedAt, JSON.stringify(f.detail)],
      );
    }
    log('checking');
    const facts = await check(admin, {
      leaseMs: options.leaseMs,
      recoveryIntervalMs: options.sweepMs,
      toleranceMs: options.toleranceMs,
    });
    const summary = haSummary(records);
    const run = { producer, nemesisErrors: [], workerFailures, requestedKinds: new Set(['failover']) };
    const rules = [
      ...adjustForMode(invariants(facts, run), { timeline }, options),
      ...haInvariants({ records, timeline, drained, options }),
    ];
    console.log(`Command: npm run chaos:ha -- ${process.argv.slice(2).join(' ')}`);
    console.log(`Manager: ${options.manager}; settings: ${JSON.stringify(manager.settings)}`);
    console.log('');
    console.log(
      '| # | fault | old primary | promoted | kill→promoted ms | kill→first completion ms | stall per host ms | rejoin ms | reinit | pg_rewind lines |',
    );
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const r of records) {
      console.log(
        `| ${r.k} | ${r.kind}${r.partition ? ` + ${r.partition.host} cut from new primary` : ''} | ${r.old} | ${r.promoted} | ` +
          `${r.killToPromotedMs} | ${r.killToFirstCompletionMs} | ${Object.values(r.stallByHostMs).join(' / ')} | ${r.rejoinMs} | ${r.reinitAfterMs === null ? 'no' : `after ${r.reinitAfterMs} ms`} | ${r.rewindsLogged} |`,
      );
    }
    console.log('');
    console.log(`Summary: ${JSON.stringify(summary)}`);
    console.log(
      `Timeline: ${JSON.stringify({ enqueues: timeline.enqueues, claims: timeline.claims, acks: timeline.acks })}`,
    );
    console.log('');
    console.log(formatReport(facts, rules, run));
    console.log(`Finished in ${Math.round((performance.now() - startedAt) / 1000)} s`);
    const ok = rules.every((r) => r.ok);
    if (options.json) {
      writeFileSync(
        options.json,
        JSON.stringify(
          { ok, options, invariants: rules, records, summary, timeline, copied, facts, workerFailures },
          null,
          2,
        ),
      );
    }
    return ok ? 0 : 1;
  } finally {
    await cleanup();
  }
}

main()
  .then((code) => {
    process.exitCode = code;
  })
  .catch((err) => {
    console.error(`chaos:ha failed: ${err?.stack ?? err}`);
    process.exitCode = 2;
  })
  .finally(() => process.exit());
