// The recovery bench's `working-victim` scenario: how many jobs does a worker at the library's
// defaults hold when it is SIGKILLed mid-drain, and how long does a survivor take to finish them?
// The victim drains a backlog with 10 ms handlers at its defaults (adaptive read-ahead, no
// prefetch) on real 1 s leases; once it has handled a quarter of the jobs, the bench kills it,
// deletes the backlog nobody holds (so the survivor has only the victim's leases to recover), and
// starts an idle survivor at its defaults. Reported: the leases held at the kill, how many of them
// were claimed but not started (the victim's own count, at most 10 ms old), the read-ahead bound
// its last claims were sized with, and the time from the kill until the survivor finished them.
import {
  clockOffsetMs,
  forkChild,
  freshSchema,
  RECOVERY_SCHEMA,
  startChild,
  stopChild,
  until,
} from './run-once.mjs';

const S = RECOVERY_SCHEMA;
const HANDLER_MS = 10;

export async function runWorkingVictim({ connectionString, admin, options, rep, log }) {
  const queues = Array.from({ length: options.queues }, (_, i) => `recovery_${i}`);
  await freshSchema(admin, connectionString, queues, options.jobs / options.queues);
  const victimOwner = `working-victim-${rep}`;
  let victim = null;
  let survivor = null;
  try {
    [victim, survivor] = await Promise.all([
      forkChild(
        'working-victim',
        {
          connectionString,
          schema: S,
          owner: victimOwner,
          queues,
          concurrency: options.concurrency,
          leaseMs: options.leaseMs,
          handlerMs: HANDLER_MS,
          workerOptions: { recoveryIntervalMs: 0, agingPassIntervalMs: 0, pruneIntervalMs: 0 },
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
          concurrency: options.concurrency,
          prefetch: null,
          backoff: null,
          workerOptions: {},
        },
        options.timeoutMs,
      ),
    ]);
    const offset = await clockOffsetMs(admin);
    let progress = { handled: 0, unstarted: 0, readAhead: 0, bound: 0 };
    victim.on('message', (message) => {
      if (message.type === 'progress') progress = message;
    });
    await startChild(victim, 'victim', options.timeoutMs);
    await until(
      () => progress.handled >= options.jobs / 4,
      options.timeoutMs,
      'the victim handling a quarter',
    );
    const atKill = { ...progress };
    const killedAtWall = Date.now();
    const killedAt = performance.now();
    victim.kill('SIGKILL');
    // Only the victim's leases are left to recover: the unclaimed backlog goes.
    await admin.query(`DELETE FROM ${S}.jobs WHERE status = 'pending'`);
    const held = await admin.query(
      `SELECT count(*)::int AS n, extract(epoch FROM max(lease_expires_at)) * 1000 AS last_lapse_ms
       FROM ${S}.jobs WHERE status = 'running' AND lease_owner = $1`,
      [victimOwner],
    );
    const heldCount = held.rows[0].n;
    await startChild(survivor, 'survivor', options.timeoutMs);
    // Nothing pending is left but the held leases: done once the jobs table is empty (a completion
    // the victim sent before the kill may still commit; it leaves the table too).
    await until(
      async () => {
        const { rows } = await admin.query(`SELECT count(*)::int AS left FROM ${S}.jobs`);
        return rows[0].left === 0;
      },
      options.timeoutMs,
      'the held jobs finished',
    );
    const allFinished = performance.now() - killedAt;
    await stopChild(survivor, 15_000);
    survivor = null;
    const lastLapse = Number(held.rows[0].last_lapse_ms) - offset - killedAtWall;
    const result = {
      held: heldCount,
      slots: options.concurrency * options.queues,
      unstarted: atKill.unstarted,
      readAhead: atKill.readAhead,
      bound: atKill.bound,
      handledBeforeKill: atKill.handled,
      lastLapse,
      allFinished,
      afterLapse: allFinished - lastLapse,
    };
    log(
      `  rep ${rep + 1}: victim held ${heldCount} leases (${atKill.unstarted} unstarted, read-ahead ${atKill.readAhead}, bound ${atKill.bound}); all finished ${allFinished.toFixed(0)} ms after the kill, last lease lapsed at ${lastLapse.toFixed(0)}`,
    );
    return result;
  } finally {
    for (const child of [victim, survivor]) {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }
}
