// The high-availability rig's failovers (chaos/ha/ha-run.mjs): each one waits for a healthy cluster
// and for the run to progress, fails the primary (SIGKILL of its machine's processes, or a cut of
// its link, in turn), waits for the manager to promote another node, measures how long until the
// new primary completes a job (in all, and per worker host), heals (the node's agent restarted, or
// its link back) and waits until the old primary follows the new one. Every time is the ledger
// server's clock (database time, one machine).
import pg from 'pg';
import { addressOf, killNamespace, nsOf, setCut, setPlugged } from './ha-net.mjs';
import { PG_PORT } from './ha-patroni.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A short-lived query on node `name`; null when it cannot be reached (or fails). */
export async function onNode(name, sql, values = [], timeoutMs = 1500) {
  const client = new pg.Client({
    connectionString: `postgres://postgres@${addressOf(name)}:${PG_PORT}/postgres`,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs * 2,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.query(sql, values)).rows;
  } catch {
    return null;
  } finally {
    client.end().catch(() => {});
  }
}

/** The nodes answering as primaries now (normally one). */
export async function primaries(nodes) {
  const roles = await Promise.all(nodes.map((n) => onNode(n, 'SELECT pg_is_in_recovery() AS r')));
  return nodes.filter((_, i) => roles[i]?.[0]?.r === false);
}

// The primary, once exactly one answers and every other node streams from it (sync: one of them
// synchronously); null after `timeoutMs`.
export async function healthy(nodes, mode, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const found = await primaries(nodes);
    if (found.length === 1) {
      const rows = await onNode(found[0], `SELECT state, sync_state FROM pg_stat_replication`);
      const streaming = (rows ?? []).filter((r) => r.state === 'streaming');
      const inSync = streaming.some((r) => r.sync_state === 'sync' || r.sync_state === 'quorum');
      if (streaming.length === nodes.length - 1 && (mode === 'async' || inSync)) return found[0];
    }
    await sleep(500);
  }
  return null;
}

/** Runs `options.failovers` failovers; returns one record per failover and the checker's faults. */
export async function runFailovers({ manager, nodes, options, ledger, log, productionDone }) {
  const now = async () => (await ledger.query('SELECT clock_timestamp() AS at')).rows[0].at;
  const completions = async () =>
    (await ledger.query(`SELECT count(*)::int AS n FROM chaos.acks WHERE result = 'completed'`)).rows[0].n;
  const hosts = Array.from({ length: options.workerHosts }, (_, i) => `w${i + 1}`);
  const partitionAt = Math.min(3, options.failovers);
  const records = [];
  const faults = [];
  for (let k = 1; k <= options.failovers; k++) {
    const waitStarted = Date.now();
    const old = await healthy(nodes, options.mode, 300_000);
    if (old === null) throw new Error(`failover ${k}: the cluster was not healthy within 300 s`);
    const healthyAfterMs = Date.now() - waitStarted;
    // Spread over the run: the k-th failover once k/(failovers+1) of the jobs completed (or the
    // producer finished, or two minutes passed).
    const target = Math.floor((k * options.jobs) / (options.failovers + 1));
    const progressDeadline = Date.now() + 120_000;
    while ((await completions()) < target && !productionDone() && Date.now() < progressDeadline)
      await sleep(250);
    const kind = k % 2 === 1 ? 'kill' : 'cut';
    const completedBefore = await completions();
    const injectedAt = await now();
    let processesKilled = 0;
    if (kind === 'kill') processesKilled = killNamespace(nsOf(old));
    else setPlugged(old, false);
    log(`failover ${k}: ${kind} of primary ${old} after ${completedBefore} completions`);

    let promoted = null;
    const promoteDeadline = Date.now() + 180_000;
    while (promoted === null && Date.now() < promoteDeadline) {
      const found = (await primaries(nodes)).filter((n) => n !== old);
      if (found.length === 1) promoted = found[0];
      else await sleep(100);
    }
    if (promoted === null) throw new Error(`failover ${k}: no node was promoted within 180 s`);
    const promotedAt = await now();
    log(`failover ${k}: ${promoted} promoted ${promotedAt - injectedAt} ms after the ${kind}`);
    // Every worker host's LISTEN connection on the new primary: how long after the promotion.
    const listenersBack = (async () => {
      const started = Date.now();
      while (Date.now() - started < 120_000) {
        const rows = await onNode(
          promoted,
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'leasehold-listener'`,
        );
        if ((rows?.[0]?.n ?? 0) >= hosts.length) return Date.now() - started;
        await sleep(100);
      }
      return null;
    })();
    if (kind === 'kill') manager.startNode(old);

    let partition = null;
    if (k === partitionAt) {
      // A worker host that cannot reach the new primary (it still reaches the others): its
      // connections find only standbys, its leases lapse, the other host takes its jobs.
      setCut('w2', [promoted]);
      partition = { at: await now(), host: 'w2' };
      log(`failover ${k}: worker host w2 cut off from ${promoted} for ${options.partitionS} s`);
    }

    // First completion on the new primary (its own finished_jobs), and per worker host (ledger),
    // after the promotion was seen: a completion committed on the old primary just before the
    // fault reached the standby with a finished_at after the fault's first instant (and a ledger
    // row written after it: workers record an answer after receiving it).
    let firstCompletionAt = null;
    const perHost = new Map();
    const measureDeadline = Date.now() + 180_000;
    while (Date.now() < measureDeadline) {
      if (firstCompletionAt === null) {
        const rows = await onNode(
          promoted,
          'SELECT min(finished_at) AS at FROM leasehold.finished_jobs WHERE finished_at > $1',
          [promotedAt],
        );
        firstCompletionAt = rows?.[0]?.at ?? null;
      }
      const { rows } = await ledger.query(
        `SELECT split_part(owner, '-', 1) AS host, min(written_at) AS at FROM chaos.acks
         WHERE result = 'completed' AND written_at > $1 GROUP BY 1`,
        [promotedAt],
      );
      for (const r of rows) if (!perHost.has(r.host)) perHost.set(r.host, r.at);
      const hostsDone = hosts.every((h) => perHost.has(h)) || (partition && perHost.size >= hosts.length - 1);
      if (firstCompletionAt !== null && hostsDone) break;
      if (productionDone() && firstCompletionAt !== null) break;
      await sleep(100);
    }
    if (partition) {
      const left = options.partitionS * 1000 - (Date.now() - new Date(partition.at).getTime());
      if (left > 0) await sleep(left);
      setCut('w2', []);
      partition.healedAt = await now();
    }
    if (kind === 'cut') {
      const left = options.cutS * 1000 - (Date.now() - new Date(injectedAt).getTime());
      if (left > 0) await sleep(left);
      setPlugged(old, true);
    }
    const healedAt = await now();
    // The old primary follows the new one (the manager rewinds or rebuilds it). One that is still
    // not streaming after 90 s gets what its operator would do: the manager's reinit (a new copy of
    // the new primary), recorded as such.
    let rejoinedAt = null;
    let reinitAfterMs = null;
    const rejoinStarted = Date.now();
    const rejoinDeadline = Date.now() + 300_000;
    while (Date.now() < rejoinDeadline) {
      if (reinitAfterMs === null && Date.now() - rejoinStarted > 90_000 && manager.reinit) {
        reinitAfterMs = Date.now() - rejoinStarted;
        log(`failover ${k}: ${old} is not following ${promoted} after 90 s; reinit (${manager.reinit(old)})`);
      }
      const role = await onNode(old, 'SELECT pg_is_in_recovery() AS r');
      const streaming = await onNode(
        promoted,
        `SELECT count(*)::int AS n FROM pg_stat_replication WHERE state = 'streaming' AND client_addr = $1`,
        [addressOf(old)],
      );
      if (role?.[0]?.r === true && streaming?.[0]?.n === 1) {
        rejoinedAt = await now();
        break;
      }
      await sleep(500);
    }
    const listenersReconnectedMs = await listenersBack;
    const ms = (a, b) => (a === null || b === null ? null : new Date(a) - new Date(b));
    const record = {
      k,
      kind,
      old,
      promoted,
      healthyAfterMs,
      completedBefore,
      processesKilled,
      injectedAt,
      promotedAt,
      killToPromotedMs: ms(promotedAt, injectedAt),
      killToFirstCompletionMs: ms(firstCompletionAt, injectedAt),
      stallByHostMs: Object.fromEntries(hosts.map((h) => [h, ms(perHost.get(h) ?? null, injectedAt)])),
      partition: partition ? { host: partition.host, ms: ms(partition.healedAt, partition.at) } : null,
      rejoinMs: ms(rejoinedAt, healedAt),
      reinitAfterMs,
      listenersReconnectedMs,
      rewindsLogged: manager.rewinds(old),
    };
    records.push(record);
    log(
      `failover ${k}: first completion on ${promoted} ${record.killToFirstCompletionMs} ms after the ${kind}; ` +
        `per host ${JSON.stringify(record.stallByHostMs)}; ${old} rejoined ${record.rejoinMs} ms after healing`,
    );
    faults.push({
      kind: kind === 'kill' ? 'failover' : 'partition',
      target: 'all',
      injectedAt,
      healedAt: rejoinedAt ?? healedAt,
      detail: {
        k,
        old,
        promoted,
        cutMs: kind === 'cut' ? options.cutS * 1000 : 0,
        processesKilled,
        killToPromotedMs: record.killToPromotedMs,
        listenersReconnectedMs,
      },
    });
    if (partition)
      faults.push({
        kind: 'partition',
        target: partition.host,
        injectedAt: partition.at,
        healedAt: partition.healedAt,
        detail: { cutMs: options.partitionS * 1000, from: promoted },
      });
  }
  return { records, faults };
}
