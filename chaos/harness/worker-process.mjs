// One chaos worker process, forked by the harness, running the BUILT package as a user would. It
// runs two consumers on one Leasehold client:
//   - a Leasehold worker on queue `chaos` (handlers: ledger start, work, a downstream call either
//     directly with the job's idempotency key or through job.effect(), ledger end);
//   - manual claimers on queue `chaos_txn` (lh.claim, then lh.complete(lease, { client }) with the
//     job's effect written in the same transaction: exactly-once effects by construction).
// Protocol over IPC: parent -> {type:'start', config} | {type:'block', ms} | {type:'stop'};
// child -> {type:'ready', owner} | {type:'status', ...} | {type:'stopped', counters} | {type:'failed'}.
// Two options serve the many-hosts harness (chaos/hosts.mjs): `libraryDefaults` leaves the lease,
// renewal, poll and sweep settings to the library's defaults; `honourSignal` makes handlers stop
// waiting on a network call once their lease is gone (job.signal), and the manual claimers stop
// waiting on a heartbeat past their own local deadline: what a handler on a partitioned host must
// do so that its run does not outlive its lease. The abandoned call may still land when the link
// returns; the fence refuses it, or the downstream deduplicates it by key.
// A third, `extraQueue` ({ name, concurrency }), serves one more queue with the same handler and
// the same lease settings: the many-hosts harness gives it to one host only, so that the jobs it
// enqueues there (long ones, which must renew) run on that host and nowhere else.
import pg from 'pg';
import { DEFAULT_LEASE_MS, Leasehold, RetryableError, SnoozeError } from '../../dist/index.js';
import { LedgerWriter } from '../records/ledger-writer.mjs';
import { runSteps } from './steps-workload.mjs';

const STATUS_EVERY_MS = 50;
const ORPHAN_EXIT_MS = 10_000;

let state = null;

process.on('message', (message) => {
  if (message.type === 'start') start(message.config).catch(fail);
  else if (message.type === 'block' && state) state.blockNextMs = message.ms;
  else if (message.type === 'stop') stop().catch(fail);
});
// The harness is gone: nobody will stop this worker, so stop now, and leave anyway if that hangs.
process.on('disconnect', () => {
  setTimeout(() => process.exit(1), ORPHAN_EXIT_MS).unref();
  stop().catch(() => process.exit(1));
});

async function start(config) {
  const owner = `${config.label}-${process.pid}`;
  // Leasehold runs on a pool of ours, named after this process, so that the nemesis can terminate
  // exactly this worker's connections (the listener opens its own, as `leasehold-listener`).
  // With a host list (the failover rig), Leasehold builds the pool itself: only its pool follows
  // the list to the new primary (its connections are then named 'leasehold', not by label).
  let pool;
  let lh;
  if (config.hostList) {
    lh = new Leasehold({ connectionString: config.connectionString, poolSize: 6, backoff: config.backoff });
    pool = lh.pool;
  } else {
    pool = new pg.Pool({ connectionString: config.connectionString, max: 6, application_name: config.label });
    lh = new Leasehold({ pool, backoff: config.backoff });
  }
  pool.on('error', () => {}); // a restart or a terminated backend drops idle clients
  // The ledger may live on a server of its own (the failover rig: it must outlive the primary).
  const ledger = new LedgerWriter(
    config.ledgerConnectionString ?? config.connectionString,
    `${config.label}-ledger`,
  );
  state = {
    ...{ config, owner, pool, lh, ledger, worker: null, blockNextMs: 0, stopping: false },
    // Handlers running now; those of long jobs (100 ms or more); manual claimers inside a job.
    ...{ handling: 0, handlingLong: 0, txnHandling: 0, txnUntil: 0 },
  };
  state.txnOwner = `${owner}:txn`;
  state.txnStats = { completed: 0, refused: 0, errors: 0 };
  state.batchStats = { calls: 0, jobs: 0, largest: 0, multi: 0 };

  const worker = lh.worker({
    owner,
    queues: {
      chaos: {
        ...(config.batchSize > 0
          ? { handler: (jobs) => runBatch(jobs), batch: { size: config.batchSize, waitMs: 20 } }
          : { handler: (job) => runHandler(job) }),
        concurrency: config.concurrency,
        ...(!config.libraryDefaults && { leaseMs: config.leaseMs, renew: 'progress' }),
        unknownErrorAttempts: config.maxAttempts,
      },
      ...(config.extraQueue && {
        [config.extraQueue.name]: {
          handler: (job) => runHandler(job, config.extraQueue.name),
          concurrency: config.extraQueue.concurrency,
          ...(!config.libraryDefaults && { leaseMs: config.leaseMs, renew: 'progress' }),
          unknownErrorAttempts: config.maxAttempts,
        },
      }),
    },
    ...(!config.libraryDefaults && {
      pollIntervalMs: config.pollIntervalMs,
      recoveryIntervalMs: config.recoveryIntervalMs,
    }),
    shutdownTimeoutMs: 5000,
  });
  worker.on('error', () => {}); // retried by the worker itself; the checker judges by the database
  worker.on('outcome', (job, result) =>
    ledger.append('acks', [job.id, job.token, owner, result, claimIdOf(job)]),
  );
  state.worker = worker;
  await worker.start();
  if (config.limited) await startLimited(config, pool, owner, ledger);
  state.txnLoops = Array.from({ length: config.txnLoops }, () => txnLoop());
  state.statusTimer = setInterval(sendStatus, STATUS_EVERY_MS);
  process.send?.({ type: 'ready', owner });
}

// The rate-limited-queue mode (harness/rate-limits.mjs): a worker of its own on the `limited` schema, sharing
// this process's pool, so kills, pauses and terminated connections hit it as they hit the rest.
// Its handlers never renew: a claim's lease is exactly leaseMs from its claim.
async function startLimited(config, pool, owner, ledger) {
  const lh = new Leasehold({ pool, schema: config.limited.schema, backoff: config.backoff });
  const worker = lh.worker({
    owner: `${owner}:limited`,
    queues: {
      [config.limited.queue]: {
        handler: async (job) => {
          await ledger.write('limited_runs', [job.id, job.token, owner]);
          await new Promise((resolve) => setTimeout(resolve, job.payload.workMs));
          await ledger.write('limited_ends', [job.id, job.token, owner]);
        },
        concurrency: config.limited.concurrency,
        leaseMs: config.leaseMs,
        renew: 'progress',
      },
    },
    pollIntervalMs: config.pollIntervalMs,
    recoveryIntervalMs: config.recoveryIntervalMs,
    shutdownTimeoutMs: 5000,
  });
  worker.on('error', () => {});
  state.limitedWorker = worker;
  await worker.start();
}

function sendStatus() {
  if (!state?.worker || !process.connected) return;
  process.send({
    type: 'status',
    handling: state.handling,
    handlingLong: state.handlingLong,
    txnHandling: state.txnHandling,
    // How much planned work the manual claimers have left (ms): a pause aimed at one lands mid-job.
    txnRemainingMs: state.txnHandling > 0 ? Math.max(0, state.txnUntil - performance.now()) : 0,
    listenerPid: state.worker.listenerPid,
    counters: { ...state.worker.counters },
    txn: { ...state.txnStats },
    batches: { ...state.batchStats },
  });
}

// Records the run's start (committed before any work), so that a run the ledger does not know
// never did anything. A start that could not be confirmed gets an end record, in case it committed.
async function recordStart(job, owner, queue) {
  const { ledger } = state;
  try {
    await ledger.write('runs', [
      job.jobId,
      job.token,
      owner,
      queue,
      job.attempt,
      job.maxAttempts,
      job.claimId,
    ]);
    return true;
  } catch {
    ledger.append('run_ends', [job.jobId, job.token, owner, 0, 'start-unconfirmed', job.claimId]);
    return false;
  }
}

// The batch workload (--batch-size): every job of the batch runs the ordinary handler side by side.
// A job whose run threw is settled alone (job.fail: retried by the same rules); the counter bumps of
// the jobs that ran commit in one job.transaction together with every completion of the batch (all
// or none: a refused one rolls every bump back, and the throw retries the others); otherwise the
// batch resolves and its completions go in one fenced statement.
async function runBatch(jobs) {
  const stats = state.batchStats;
  stats.calls++;
  stats.jobs += jobs.length;
  stats.largest = Math.max(stats.largest, jobs.length);
  if (jobs.length > 1) stats.multi++;
  const runs = await Promise.allSettled(jobs.map((job) => runHandler(job, 'chaos', true)));
  await Promise.all(
    runs.map((run, i) => (run.status === 'rejected' ? jobs[i].fail(run.reason).catch(() => {}) : null)),
  );
  const counted = jobs.filter((job, i) => runs[i].status === 'fulfilled' && job.payload.mode === 'counter');
  if (counted.length === 0) return;
  await jobs[0].transaction(async (client) => {
    for (const job of counted) {
      await client.query(
        `INSERT INTO chaos.counters (job_id, n, token) VALUES ($1, 1, $2)
         ON CONFLICT (job_id) DO UPDATE SET n = chaos.counters.n + 1, token = excluded.token`,
        [job.id, job.token],
      );
    }
  });
}

async function runHandler(job, queue = 'chaos', batched = false) {
  const { ledger, owner } = state;
  const claimId = claimIdOf(job);
  const ref = {
    jobId: job.id,
    token: job.token,
    attempt: job.attempt,
    maxAttempts: job.maxAttempts,
    claimId,
  };
  // Timed from before the start record: started_at + duration then ends no earlier than the run.
  const started = performance.now();
  const signal = state.config.honourSignal ? job.signal : null;
  let recorded;
  try {
    recorded = await orAbort(recordStart(ref, owner, queue), signal);
  } catch (err) {
    // The lease went while the start record was on its way: the handler did nothing at all.
    ledger.append('run_ends', [job.id, job.token, owner, 0, 'start-abandoned']);
    throw new RetryableError('the lease was lost before the run started', { cause: err });
  }
  if (!recorded) {
    throw new RetryableError('the ledger was unreachable; the run did not start');
  }
  const long = job.payload.workMs >= 100;
  state.handling++;
  if (long) state.handlingLong++;
  let outcome = 'returned';
  try {
    if (state.blockNextMs > 0) {
      const ms = state.blockNextMs;
      state.blockNextMs = 0;
      // Blocks the whole event loop, as a CPU-bound or synchronous handler would: no timer, no
      // lease renewal, no abort can run in this process until it ends.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
      outcome = 'blocked';
    }
    // A workflow (--steps): its steps, each effect in the ledger; a sleep hands the job back.
    if (job.payload.mode === 'steps') return await runSteps(job, { ledger, owner, claimId });
    await sleep(job.payload.workMs, job.signal);
    // A handler that honours its lease: no downstream call once the lease is gone.
    if (!(await job.progress())) throw new Error('the lease was lost before the downstream call');
    if (job.payload.mode === 'counter') {
      // The bump commits with the job's fenced completion or not at all (job.transaction); in a
      // batch, with the whole batch's (runBatch).
      if (batched) return;
      await job.transaction((client) =>
        client.query(
          `INSERT INTO chaos.counters (job_id, n, token) VALUES ($1, 1, $2)
           ON CONFLICT (job_id) DO UPDATE SET n = chaos.counters.n + 1, token = excluded.token`,
          [job.id, job.token],
        ),
      );
    } else if (job.payload.mode === 'effect') {
      await orAbort(
        job.effect('downstream', {
          perform: async (key) => {
            await ledger.callDownstream(
              key,
              job.id,
              job.token,
              owner,
              'effect',
              claimId,
              job.payload.ref ?? null,
            );
            return { applied: true };
          },
          reconcile: async (key) =>
            (await ledger.downstreamApplied(key))
              ? { happened: true, result: { applied: true } }
              : { happened: false },
        }),
        signal,
      );
    } else {
      await orAbort(
        ledger.callDownstream(
          job.idempotencyKey,
          job.id,
          job.token,
          owner,
          'plain',
          claimId,
          job.payload.ref ?? null,
        ),
        signal,
      );
    }
  } catch (err) {
    // A workflow's durable sleep: handed back as thrown (no attempt spent), not a failed run.
    if (err instanceof SnoozeError) {
      outcome = outcome === 'blocked' ? 'blocked-slept' : 'slept';
      throw err;
    }
    outcome = outcome === 'blocked' ? 'blocked-threw' : 'threw';
    // Nothing here fails for a logical reason: a lost lease (nothing more is sent for it), or the
    // database going away, which is worth retrying with the full attempt budget.
    throw new RetryableError('the run did not finish', { cause: err });
  } finally {
    state.handling--;
    if (long) state.handlingLong--;
    ledger.append('run_ends', [job.id, job.token, owner, performance.now() - started, outcome, claimId]);
  }
}

async function txnLoop() {
  const { lh, config } = state;
  let failures = 0;
  while (!state.stopping) {
    let leases;
    const claimSentAt = performance.now();
    try {
      // One at a time: a claimed job waiting behind a slow one would see its lease lapse unrenewed.
      leases = await lh.claim({
        queue: 'chaos_txn',
        owner: state.txnOwner,
        limit: 1,
        leaseMs: txnLeaseMs(),
      });
      failures = 0;
    } catch {
      failures++;
      await sleep(Math.min(2000, 50 * 2 ** failures));
      continue;
    }
    if (leases.length === 0) {
      await sleep(config.pollIntervalMs);
      continue;
    }
    for (const lease of leases) await runTxnJob(lease, claimSentAt);
  }
}

// A job completed by hand: its effect is written in the completion's own transaction, so it
// commits exactly when the completion is accepted. A stale claimer's completion is refused
// (and the refusal counted, since the transaction still commits with nothing else in it).
async function runTxnJob(lease, claimSentAt) {
  const { lh, pool, ledger, txnOwner, txnStats, config } = state;
  const started = performance.now();
  if (!(await recordStart(lease, txnOwner, 'chaos_txn'))) return; // its lease will expire
  state.handling++;
  state.txnHandling++;
  let outcome = 'returned';
  try {
    // A retry is slow (two leases long, renewed by heartbeat): a stale claimer that wakes up late
    // then finds its successor still running, and its completion must not take the successor's place.
    const workMs = lease.attempt > 1 ? 2 * txnLeaseMs() : lease.payload.workMs;
    state.txnUntil = Math.max(state.txnUntil, started + workMs);
    const deadline = await workWithHeartbeats(lease, workMs, claimSentAt);
    if (deadline === false) {
      outcome = 'lease-lost';
      return;
    }
    const client = await pool.connect();
    // pg emits 'error' on a checked-out client whose connection dies; unheard, it ends the process.
    const ignore = () => {};
    client.on('error', ignore);
    let broken = null;
    // With honourSignal, a claimer that honours its lease: a completion transaction still waiting
    // for the database when the lease could have lapsed is abandoned (its connection closed, so it
    // can never commit), as Leasehold's own job.transaction does. Otherwise it waits on a cut link
    // for the statement timeout while a successor runs the job.
    const abandon = config.honourSignal
      ? setTimeout(() => client.connection?.stream?.destroy(), Math.max(0, deadline - performance.now()))
      : null;
    try {
      await client.query('BEGIN');
      const accepted = await lh.complete(lease, { client });
      if (accepted) {
        await client.query('INSERT INTO chaos.txn_effects (job_id, token, owner) VALUES ($1, $2, $3)', [
          lease.jobId,
          lease.token,
          txnOwner,
        ]);
      }
      await client.query('COMMIT');
      if (accepted) txnStats.completed++;
      else txnStats.refused++;
      ledger.append('acks', [
        lease.jobId,
        lease.token,
        txnOwner,
        accepted ? 'completed' : 'lost',
        lease.claimId,
      ]);
    } catch (err) {
      broken = err;
      txnStats.errors++;
      outcome = 'threw';
      await client.query('ROLLBACK').catch(() => {});
    } finally {
      if (abandon) clearTimeout(abandon);
      client.off('error', ignore);
      client.release(broken ?? undefined);
    }
  } catch {
    outcome = 'threw';
  } finally {
    state.handling--;
    state.txnHandling--;
    ledger.append('run_ends', [
      lease.jobId,
      lease.token,
      txnOwner,
      performance.now() - started,
      outcome,
      lease.claimId,
    ]);
  }
}

// The manual claimers' lease: the harness's, or the library's default.
function txnLeaseMs() {
  return state.config.libraryDefaults ? DEFAULT_LEASE_MS : state.config.leaseMs;
}

// Sleeps `workMs`, renewing the lease every third of it; false once a renewal is refused (or,
// with honourSignal, not answered before the lease could have lapsed: a fifth of it early), else
// the local deadline the last answered claim or renewal gives (performance.now() time).
async function workWithHeartbeats(lease, workMs, claimSentAt) {
  const { lh, config } = state;
  const leaseMs = txnLeaseMs();
  const every = leaseMs / 3;
  const until = performance.now() + workMs;
  let deadline = claimSentAt + leaseMs * 0.8;
  while (performance.now() < until) {
    await sleep(Math.min(every, until - performance.now()));
    if (performance.now() >= until) break;
    const sentAt = performance.now();
    const beat = lh.heartbeat(lease, { leaseMs });
    const answer = config.honourSignal ? await beforeDeadline(beat, deadline) : await beat;
    if (!answer) return false;
    deadline = sentAt + leaseMs * 0.8;
  }
  return deadline;
}

// `promise`'s value, or false if it has not settled by `deadline` (performance.now() time).
function beforeDeadline(promise, deadline) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(false), Math.max(0, deadline - performance.now()));
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

// `promise`, or a rejection as soon as `signal` aborts (the promise then goes on unheard).
function orAbort(promise, signal) {
  if (!signal) return promise;
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

async function stop() {
  if (!state || state.stopping) return;
  state.stopping = true;
  clearInterval(state.statusTimer);
  await state.worker?.stop();
  await state.limitedWorker?.stop();
  await Promise.all(state.txnLoops ?? []);
  await state.ledger.drain();
  const counters = { ...state.worker.counters };
  await Promise.all([state.ledger.close(), state.pool.end()]);
  process.send?.({ type: 'stopped', counters, txn: state.txnStats }, () => process.exit(0));
}

// The claim id of a worker's job: not part of the handler's JobContext, but of the lease the job
// object carries. The ledger keeps it so that a failover's checker can tell two claims with one
// token number apart (the old primary's lost claim, the new primary's reissue).
function claimIdOf(job) {
  return job.lease?.claimId ?? null;
}

function fail(err) {
  process.send?.({ type: 'failed', message: String(err?.stack ?? err) }, () => process.exit(1));
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }
    function onAbort() {
      clearTimeout(timer);
      reject(signal.reason);
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
