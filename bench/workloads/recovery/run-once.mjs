// One repetition of the recovery bench: a victim process claims every job and hangs in its
// handlers, an idle survivor process waits, every lease the victim holds is set to lapse one lease
// length (1 s) after the planned kill, the victim is SIGKILLed at that moment, and the bench polls
// finished_jobs until the survivor has finished them all. Returns the times of each phase in ms after the kill, from the bench's clock
// (all finished) and from the tables (lease lapse, sweeps, first and last completion, in database
// time converted to the bench's clock).
//
// Why the victim claims with a long lease that the bench then shortens: a victim that really held
// 10,000 one-second leases had to renew all of them every third of a second, and on the shared
// 2-core machine its lease keeper fell behind and let leases lapse before the survivor was even
// running (a new connection alone took up to a second at load average 9). Setting every lease to
// lapse exactly 1 s after the kill is the worst case of a 1 s lease, and the same for every
// repetition.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Leasehold } from '../../../dist/index.js';

export const RECOVERY_SCHEMA = 'bench_recovery';
const S = RECOVERY_SCHEMA;
const POLL_MS = 10;
// The victim's lease at claim: long enough to outlast any start-up on a loaded machine.
const VICTIM_CLAIM_LEASE_MS = 120_000;
// How far ahead the kill is planned when the victim's leases are set to lapse one lease after it;
// a longer notice is tried when setting them took longer than the shorter one.
const KILL_NOTICES_MS = [500, 1500, 4000];
const CHILD_SCRIPT = fileURLToPath(new URL('./worker-process.mjs', import.meta.url));

/** Child processes still alive, killed by the caller's cleanup whatever happens. */
export const liveChildren = new Set();

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function until(check, deadlineMs, what) {
  const deadline = performance.now() + deadlineMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await sleep(POLL_MS);
  }
}

/** Forks a worker process in `role`; resolves once it is connected and its worker built. */
export function forkChild(role, config, timeoutMs) {
  // BENCH_CPU_PROF_DIR=folder: the survivor writes a V8 CPU profile there when it exits.
  const profile = role === 'survivor' && process.env.BENCH_CPU_PROF_DIR;
  const child = fork(CHILD_SCRIPT, [role], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    ...(profile ? { execArgv: ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF_DIR}`] } : {}),
  });
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  child.send({ lifetimeMs: timeoutMs * 3, ...config });
  return answer(child, role, 'ready', timeoutMs);
}

/** Tells a child to start its worker; resolves once it runs (and listens). */
export function startChild(child, role, timeoutMs) {
  const started = answer(child, role, 'started', timeoutMs);
  child.send({ type: 'start' });
  return started;
}

function answer(child, role, type, timeoutMs) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${role}: no '${type}' within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onMessage = (message) => {
      if (message.type !== type && message.type !== 'failed') return;
      clearTimeout(timer);
      child.off('message', onMessage);
      if (message.type === 'failed') reject(new Error(`${role} failed: ${message.message}`));
      else resolve(child);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`${role} exited (${code})`)));
  });
}

/** Asks a child to stop its worker; kills it if it does not answer in time. */
export async function stopChild(child, timeoutMs) {
  if (child.exitCode !== null || child.signalCode !== null) return null;
  const stopped = new Promise((resolve) => {
    child.on('message', (message) => {
      if (message.type === 'stopped') resolve({ ...message.counters, cpuMs: message.cpuMs });
    });
    child.once('exit', () => resolve(null));
  });
  child.send({ type: 'stop' });
  const counters = await Promise.race([stopped, sleep(timeoutMs).then(() => null)]);
  // It exits by itself once it has answered (and written its CPU profile, if asked for one).
  if (child.exitCode === null && child.signalCode === null)
    await Promise.race([new Promise((resolve) => child.once('exit', resolve)), sleep(3000)]);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  return counters;
}

/** Database clock minus the bench's wall clock, from the quickest of a few round trips. */
export async function clockOffsetMs(admin) {
  let best = null;
  for (let i = 0; i < 5; i++) {
    const sent = Date.now();
    const { rows } = await admin.query('SELECT extract(epoch FROM clock_timestamp()) * 1000 AS db_ms');
    const received = Date.now();
    const rtt = received - sent;
    if (!best || rtt < best.rtt) best = { rtt, offset: Number(rows[0].db_ms) - (sent + rtt / 2) };
  }
  return best.offset;
}

export async function freshSchema(admin, connectionString, queues, jobsPerQueue) {
  await admin.query(`DROP SCHEMA IF EXISTS ${S} CASCADE`);
  const lh = new Leasehold({ connectionString, schema: S, poolSize: 2 });
  try {
    await lh.migrate();
    for (const queue of queues) {
      await lh.enqueueMany(
        queue,
        Array.from({ length: jobsPerQueue }, () => ({ payload: {} })),
      );
    }
  } finally {
    await lh.close();
  }
  await admin.query(`VACUUM (ANALYZE) ${S}.jobs`);
}

/**
 * Runs one repetition. `scenario` gives the survivor's settings: `workerOptions` (such as
 * recoveryIntervalMs), `backoff` (the client's, used by its sweep), `concurrency` and `prefetch`.
 */
export async function runOnce({ connectionString, admin, options, scenario, rep, log }) {
  const queues = Array.from({ length: options.queues }, (_, i) => `recovery_${i}`);
  const perQueue = options.jobs / options.queues;
  await freshSchema(admin, connectionString, queues, perQueue);
  const victimOwner = `victim-${rep}`;
  let victim = null;
  let survivor = null;
  try {
    // Both processes connect first, so that starting either is a matter of milliseconds.
    [victim, survivor] = await Promise.all([
      forkChild(
        'victim',
        {
          connectionString,
          schema: S,
          owner: victimOwner,
          queues,
          concurrency: perQueue,
          leaseMs: VICTIM_CLAIM_LEASE_MS,
          // The victim only claims, in the largest batches: no sweep or other maintenance of its own.
          workerOptions: {
            claimBatchSize: 1000,
            recoveryIntervalMs: 0,
            agingPassIntervalMs: 0,
            pruneIntervalMs: 0,
          },
        },
        options.timeoutMs,
      ),
      forkChild(
        'survivor',
        {
          connectionString,
          schema: S,
          owner: `survivor-${rep}`,
          queues,
          concurrency: scenario.concurrency,
          prefetch: scenario.prefetch,
          backoff: scenario.backoff,
          workerOptions: scenario.workerOptions,
        },
        options.timeoutMs,
      ),
    ]);
    const offset = await clockOffsetMs(admin);
    await startChild(victim, 'victim', options.timeoutMs);
    await until(
      async () => {
        const { rows } = await admin.query(
          `SELECT count(*)::int AS n FROM ${S}.jobs
           WHERE status = 'running' AND lease_owner = $1 AND lease_expires_at > now()`,
          [victimOwner],
        );
        return rows[0].n === options.jobs;
      },
      options.timeoutMs,
      `the victim holding ${options.jobs}`,
    );
    // The survivor starts once nothing is left to claim, and is idle (its first claims came back
    // empty, its listener is connected) at the kill.
    await startChild(survivor, 'survivor', options.timeoutMs);
    await sleep(100);
    // Every lease the victim holds is set to lapse exactly one lease length after a kill planned a
    // little ahead (the statement takes a while on a loaded machine): the worst case of a lease that
    // length, claimed or renewed just before the kill. The victim never renews, so they stay so.
    let plannedKillWall = 0;
    for (const notice of KILL_NOTICES_MS) {
      plannedKillWall = Date.now() + notice;
      const shortened = await admin.query(
        `WITH held AS (
           UPDATE ${S}.jobs SET lease_expires_at = to_timestamp($2::double precision / 1000)
           WHERE status = 'running' AND lease_owner = $1 AND lease_expires_at > now()
           RETURNING id
         )
         SELECT count(*)::int AS n FROM held`,
        [victimOwner, plannedKillWall + offset + options.leaseMs],
      );
      if (shortened.rows[0].n !== options.jobs) {
        throw new Error(`the victim held ${shortened.rows[0].n} of ${options.jobs} unexpired leases`);
      }
      if (Date.now() < plannedKillWall) break;
      if (notice === KILL_NOTICES_MS.at(-1)) {
        throw new Error(`setting the leases took longer than ${notice} ms: the machine is too busy`);
      }
    }
    await sleep(plannedKillWall - Date.now());
    const killedAt = performance.now();
    const killedAtWall = Date.now();
    victim.kill('SIGKILL');
    const finished = async () => {
      const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${S}.finished_jobs`);
      return rows[0].n === options.jobs;
    };
    await until(finished, options.timeoutMs, `all ${options.jobs} finished`);
    const allFinishedMs = performance.now() - killedAt;
    const counters = await stopChild(survivor, 15_000);
    survivor = null;
    const facts = await readFacts(admin, victimOwner);
    const sinceKill = (dbMs) => Number(dbMs) - offset - killedAtWall;
    verify(facts, options.jobs);
    if (counters && counters.recovered !== options.jobs) {
      throw new Error(`the survivor's sweeps moved ${counters.recovered} leases, not ${options.jobs}`);
    }
    const result = {
      allFinished: allFinishedMs,
      leasesLapse: plannedKillWall + options.leaseMs - killedAtWall,
      afterLapse: allFinishedMs - (plannedKillWall + options.leaseMs - killedAtWall),
      firstSweep: sinceKill(facts.first_sweep_ms),
      lastSweep: sinceKill(facts.last_sweep_ms),
      sweepBatches: facts.sweeps,
      largestBackoff: Number(facts.largest_delay_ms),
      firstFinished: sinceKill(facts.first_finished_ms),
      lastFinished: sinceKill(facts.last_finished_ms),
      // The survivor's CPU time (user + system) from its start to its stop: nearly all of it the
      // recovery, since it was idle before the kill.
      survivorCpu: counters?.cpuMs ?? Number.NaN,
    };
    result.sweeping = result.lastSweep - result.firstSweep;
    result.processing = result.lastFinished - result.firstFinished;
    log(
      `  rep ${rep + 1}: all finished ${allFinishedMs.toFixed(0)} ms after the kill (leases lapsed ${result.leasesLapse.toFixed(0)}, swept ${result.firstSweep.toFixed(0)}–${result.lastSweep.toFixed(0)} in ${result.sweepBatches} batches, first finished ${result.firstFinished.toFixed(0)})`,
    );
    return result;
  } finally {
    // Only a failed repetition still has children here: nothing of theirs is worth waiting for.
    for (const child of [victim, survivor]) {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }
}

/** What the tables say about the recovery: sweep batches, backoff given, completions. */
async function readFacts(admin, victimOwner) {
  const sweeps = await admin.query(
    `SELECT count(*)::int AS events, count(DISTINCT at)::int AS sweeps,
            extract(epoch FROM min(at)) * 1000 AS first_sweep_ms,
            extract(epoch FROM max(at)) * 1000 AS last_sweep_ms,
            coalesce(max(delay_ms), 0) AS largest_delay_ms,
            count(*) FILTER (WHERE lease_owner <> $1)::int AS not_victims
     FROM ${S}.job_events WHERE kind = 'lease_expired'`,
    [victimOwner],
  );
  const finished = await admin.query(
    `SELECT count(*)::int AS n, count(*) FILTER (WHERE attempt_count <> 2)::int AS not_twice,
            count(*) FILTER (WHERE lease_owner = $1)::int AS by_victim,
            extract(epoch FROM min(finished_at)) * 1000 AS first_finished_ms,
            extract(epoch FROM max(finished_at)) * 1000 AS last_finished_ms
     FROM ${S}.finished_jobs`,
    [victimOwner],
  );
  const left = await admin.query(`SELECT count(*)::int AS n FROM ${S}.jobs`);
  const refused = await admin.query(
    `SELECT coalesce(sum(refused_count), 0)::int AS n FROM ${S}.lease_refusals`,
  );
  return { ...sweeps.rows[0], ...finished.rows[0], left: left.rows[0].n, refused: refused.rows[0].n };
}

/**
 * Every job was claimed exactly twice (the victim, then the survivor), its lease expired once,
 * and it finished under the survivor; nothing is left behind and no write was refused.
 */
function verify(facts, jobs) {
  const ok =
    facts.n === jobs &&
    facts.not_twice === 0 &&
    facts.by_victim === 0 &&
    facts.events === jobs &&
    facts.not_victims === 0 &&
    facts.left === 0 &&
    facts.refused === 0;
  if (!ok) throw new Error(`recovery did not end as expected: ${JSON.stringify(facts)}`);
}
