// The nemesis's faults. Each one injects, waits, heals, and returns its record: kind, target (a
// worker label, or 'all'), injected and healed times in DATABASE time, and details. Times are read
// just before a fault is injected and just before it is healed, so windows err on the wide side.
//
// `ctx` (built by main.mjs): { server, admin, lh, config, rng, log, workers: live ChaosWorkers,
// replace(worker) -> new worker, dbNow() -> Date, pin: the pinned transaction while one is held }.
import pg from 'pg';
import { isLeaseholdError, Leasehold } from '../../dist/index.js';

/** Every fault kind, in the order of the scheduled round. */
export const FAULT_KINDS = [
  'kill',
  'pause',
  'short-pause',
  'restart',
  'pin',
  'block',
  'terminate',
  'sweeps',
  'exhaustion',
  'skew',
];

/** Kinds the random phase draws from (skew is a property of some workers; one pin at a time). */
export const RANDOM_KINDS = [
  'kill',
  'pause',
  'short-pause',
  'block',
  'terminate',
  'sweeps',
  'exhaustion',
  'restart',
];

const BUSY_PATIENCE_MS = 3000;

/** 1. SIGKILL of a worker while it runs a handler; a replacement worker is started. */
export async function killWorker(ctx) {
  const { target, busy } = await pickBusy(ctx, (s) => s.handlingLong > 0);
  const handling = target.status?.handling ?? 0;
  const injectedAt = await ctx.dbNow();
  target.kill();
  const killedAt = await ctx.dbNow();
  await sleep(300);
  await ctx.replace(target);
  return {
    kind: 'kill',
    target: target.label,
    injectedAt,
    healedAt: await ctx.dbNow(),
    detail: { busy, handling, killedAt },
  };
}

/** 2. SIGSTOP past the lease (and a sweep), then SIGCONT: its late writes must be refused. */
export async function pauseWorker(ctx, { short = false } = {}) {
  const { leaseMs, recoveryIntervalMs } = ctx.config;
  // Caught inside a job completed by hand, the claimer will send its completion late, and be refused.
  let { target, busy } = await pickBusy(ctx, (s) => s.txnRemainingMs > 60);
  const caught = busy ? 'a hand-completed job' : 'a long job';
  if (!busy) ({ target, busy } = await pickBusy(ctx, (s) => s.handlingLong > 0));
  // 3. A pause shorter than the lease: a quarter of it, well inside the renewal margin.
  const pausedMs = short ? Math.round(leaseMs / 4) : 2 * leaseMs + 2 * recoveryIntervalMs;
  const injectedAt = await ctx.dbNow();
  target.pause();
  await sleep(pausedMs);
  const healedAt = await ctx.dbNow();
  target.resume();
  return {
    kind: short ? 'short-pause' : 'pause',
    target: target.label,
    injectedAt,
    healedAt,
    detail: { caught: busy ? caught : 'no job', pausedMs },
  };
}

/** 4. A handler that blocks its process's event loop past its lease. */
export async function blockEventLoop(ctx) {
  const { leaseMs, recoveryIntervalMs } = ctx.config;
  const target = pick(ctx, (w) => w.fate === 'running');
  const blockMs = Math.round(leaseMs * 1.5);
  const injectedAt = await ctx.dbNow();
  target.blockNext(blockMs);
  // The block starts with that worker's next handler; wait for it to be over and swept.
  await sleep(blockMs + 2 * recoveryIntervalMs + 500);
  return {
    kind: 'block',
    target: target.label,
    injectedAt,
    healedAt: await ctx.dbNow(),
    detail: { blockMs },
  };
}

/** 5. pg_terminate_backend of one worker's connections and of every wake-up listener. */
export async function terminateBackends(ctx) {
  const target = pick(ctx, (w) => w.fate === 'running');
  const injectedAt = await ctx.dbNow();
  const { rows } = await ctx.admin.query(
    `SELECT application_name AS app, count(*)::int AS n, bool_and(pg_terminate_backend(pid)) AS ok
     FROM pg_stat_activity
     WHERE (application_name = $1 OR application_name = 'leasehold-listener') AND pid <> pg_backend_pid()
     GROUP BY application_name`,
    [target.label],
  );
  const terminated = Object.fromEntries(rows.map((row) => [row.app, row.n]));
  const reconnectMs = await listenersBack(ctx, 20_000);
  return {
    kind: 'terminate',
    target: target.label,
    injectedAt,
    healedAt: await ctx.dbNow(),
    detail: { terminated, listenersReconnectedMs: reconnectMs },
  };
}

/** 6. PostgreSQL stopped with `pg_ctl stop -m immediate`, then restarted on the same port. */
export async function restartPostgres(ctx) {
  await ctx.pin?.done; // a pinned transaction would die with the server: let it finish first
  const injectedAt = await ctx.dbNow();
  const downMs = 2000;
  await ctx.server.crash();
  await sleep(downMs);
  await ctx.server.start();
  const healedAt = await ctx.dbNow();
  const reconnectMs = await listenersBack(ctx, 30_000);
  return {
    kind: 'restart',
    target: 'all',
    injectedAt,
    healedAt,
    detail: { downMs, listenersReconnectedMs: reconnectMs },
  };
}

/**
 * 7. A transaction held open (a repeatable-read snapshot: the xmin horizon pinned) while work goes
 * on. Runs in the background; `ctx.pin.done` settles with its record. The health check is asked,
 * half-way through, whether it sees the old transaction.
 */
export async function pinXmin(ctx) {
  const holdMs = ctx.config.pinMs;
  const client = new pg.Client({
    connectionString: ctx.server.connectionString,
    application_name: 'chaos-pin',
  });
  client.on('error', () => {});
  await client.connect();
  const injectedAt = await ctx.dbNow();
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await client.query('SELECT count(*) FROM leasehold.jobs');
  const done = (async () => {
    await sleep(holdMs / 2);
    const health = await ctx.lh
      .checkHealth({ maxOldTransactionMs: Math.round(holdMs / 4) })
      .catch(() => null);
    const flagged = health?.failures?.some((f) => f.rule === 'maxOldTransactionMs') ?? false;
    await sleep(holdMs / 2);
    const healedAt = await ctx.dbNow();
    await client.query('COMMIT').catch(() => {});
    await client.end().catch(() => {});
    ctx.pin = null;
    return {
      kind: 'pin',
      target: 'all',
      injectedAt,
      healedAt,
      detail: { holdMs, healthCheckFlagged: flagged },
    };
  })();
  ctx.pin = { done };
  return done;
}

/**
 * 10. Several recovery sweeps at once: a busy worker is killed, and when its leases lapse, six
 * sweepers of the harness's own run `recoverExpired()` together, beside every worker's own sweep.
 */
export async function concurrentSweeps(ctx) {
  const { leaseMs } = ctx.config;
  const { target } = await pickBusy(ctx, (s) => s.handlingLong > 0);
  const injectedAt = await ctx.dbNow();
  target.kill();
  const killedAt = await ctx.dbNow();
  const sweepers = Array.from(
    { length: 6 },
    () =>
      new Leasehold({
        connectionString: ctx.server.connectionString,
        poolSize: 1,
        backoff: ctx.config.backoff,
      }),
  );
  for (const s of sweepers) s.pool.on('error', () => {});
  // Start just before the killed worker's first lease lapses, so the sweeps really race.
  const { rows } = await ctx.admin.query(
    `SELECT extract(epoch FROM min(lease_expires_at) - clock_timestamp()) * 1000 AS ms
     FROM leasehold.jobs WHERE status = 'running' AND split_part(lease_owner, '-', 1) = $1`,
    [target.label],
  );
  await sleep(Math.max(0, (rows[0]?.ms ?? leaseMs) - 50));
  const moved = [];
  const until = performance.now() + 1500;
  try {
    await Promise.all(
      sweepers.map(async (sweeper, i) => {
        moved[i] = 0;
        while (performance.now() < until) {
          const r = await sweeper.recoverExpired().catch(() => ({ retried: 0, dead: 0 }));
          moved[i] += r.retried + r.dead;
        }
      }),
    );
  } finally {
    await Promise.all(sweepers.map((s) => s.close()));
  }
  await ctx.replace(target);
  return {
    kind: 'sweeps',
    target: target.label,
    injectedAt,
    healedAt: await ctx.dbNow(),
    detail: { movedBySweeper: moved, killedAt },
  };
}

/**
 * 8. Connection exhaustion: every connection slot taken; a fresh client's enqueue must fail with a
 * typed error (or succeed if a slot came free), never hang.
 */
export async function exhaustConnections(ctx) {
  const injectedAt = await ctx.dbNow();
  const hogs = [];
  let refusal = null;
  for (let i = 0; i < 500 && !refusal; i++) {
    const client = new pg.Client({
      connectionString: ctx.server.connectionString,
      application_name: 'chaos-hog',
    });
    client.on('error', () => {});
    try {
      await client.connect();
      hogs.push(client);
    } catch (err) {
      refusal = err?.code ?? String(err?.message ?? err);
    }
  }
  const probe = new Leasehold({ connectionString: ctx.server.connectionString, poolSize: 1 });
  probe.pool.on('error', () => {});
  const started = performance.now();
  let enqueue;
  try {
    const { id } = await withTimeout(
      probe.enqueue('chaos', { mode: 'plain', workMs: 1 }, { maxAttempts: ctx.config.maxAttempts }),
      30_000,
    );
    ctx.acked.push({ id, queue: 'chaos', mode: 'plain', delayMs: 0 });
    enqueue = { result: 'accepted' };
  } catch (err) {
    enqueue = {
      result: err?.name === 'TimeoutError' ? 'hung' : 'rejected',
      typed: isLeaseholdError(err),
      code: err?.code,
      sqlState: err?.sqlState,
    };
  }
  enqueue.ms = Math.round(performance.now() - started);
  await sleep(2000);
  const healedAt = await ctx.dbNow();
  await Promise.all(hogs.map((c) => c.end().catch(() => {})));
  await probe.close().catch(() => {});
  return {
    kind: 'exhaustion',
    target: 'all',
    injectedAt,
    healedAt,
    detail: { held: hogs.length, refusal, enqueue },
  };
}

/** 9. The skewed-clock workers, recorded as one fault spanning the run (see main.mjs). */
export function skewRecord(workers, startedAt, endedAt) {
  return {
    kind: 'skew',
    target: workers.map((w) => w.label).join(','),
    injectedAt: startedAt,
    healedAt: endedAt,
    detail: { skewMs: Object.fromEntries(workers.map((w) => [w.label, w.skewMs])) },
  };
}

// Waits until every live worker has its listener connected again; returns how long that took.
async function listenersBack(ctx, timeoutMs) {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    const expected = ctx.workers.filter((w) => w.fate === 'running').length;
    const { rows } = await ctx.admin
      .query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'leasehold-listener'`)
      .catch(() => ({ rows: [{ n: -1 }] }));
    if (rows[0].n >= expected) return Math.round(performance.now() - started);
    await sleep(50);
  }
  return null;
}

/**
 * A running worker whose latest status (at most 40 ms old) satisfies `busy`, waiting up to
 * BUSY_PATIENCE_MS for one; after that, any running worker (`busy: false`). A status that fresh
 * means a long job (100 ms or more) it shows is still running when the signal lands.
 */
async function pickBusy(ctx, busy) {
  const deadline = performance.now() + BUSY_PATIENCE_MS;
  while (performance.now() < deadline) {
    const now = performance.now();
    const ready = ctx.workers.filter(
      (w) => w.fate === 'running' && w.status && now - w.statusAt < 40 && busy(w.status),
    );
    if (ready.length > 0) return { target: ready[Math.floor(ctx.rng() * ready.length)], busy: true };
    await sleep(5);
  }
  return { target: pick(ctx, (w) => w.fate === 'running'), busy: false };
}

function pick(ctx, accept) {
  const candidates = ctx.workers.filter(accept);
  if (candidates.length === 0) throw new Error('no worker to aim the fault at');
  return candidates[Math.floor(ctx.rng() * candidates.length)];
}

function withTimeout(promise, ms) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(Object.assign(new Error(`no answer in ${ms} ms`), { name: 'TimeoutError' })),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
