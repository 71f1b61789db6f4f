// Enqueues the run's jobs at an even pace over the run's duration, through the public API
// (enqueueMany for most, single enqueue for some), and remembers each acknowledged id: those are
// the jobs that must never be lost. An enqueue that fails is retried as new jobs; it must fail
// with a typed Leasehold error, and no call may hang. With `--steps` and `--event-pct`, it also
// sends the waiting workflows' events (lh.sendEvent): before their enqueue, or a little after it is
// acknowledged; an event send that fails is retried, and must fail typed too.
import { randomBytes } from 'node:crypto';
import { isLeaseholdError } from '../../dist/index.js';
import { enqueueFlowJobs, makeFlow } from './flows-producer.mjs';
import { makeWorkflow, WORKFLOW_EVENT, workflowEvent } from './steps-workload.mjs';

const TICK_MS = 50;
const MAX_BATCH = 200;

/**
 * The job mix: which queue, mode, delay and work time a job gets (with `steps`, every job is a
 * workflow; `eventPct`% of them wait for an event keyed by the job's `index` in the run).
 */
export function makeJob(rng, counterPct = 0, steps = 0, eventPct = 0, index = 0) {
  if (steps > 0) {
    const delayMs = rng() < 0.03 ? 500 + Math.floor(rng() * 2500) : 0;
    const eventKey = eventPct > 0 ? `wf-${index}` : null;
    return { queue: 'chaos', payload: makeWorkflow(rng, steps, eventPct, eventKey), delayMs };
  }
  const roll = rng();
  const workMs = rng() < 0.9 ? 2 + Math.floor(rng() * 18) : 100 + Math.floor(rng() * 300);
  // Jobs completed by hand run longer, so that a paused claimer is often caught inside one.
  if (roll < 0.05) return { queue: 'chaos_txn', payload: { mode: 'txn', workMs: 150 + workMs }, delayMs: 0 };
  // Counter jobs take a share of the plain ones, from the same roll: the seed's job mix is otherwise unchanged.
  const mode = roll < 0.15 ? 'effect' : (roll - 0.15) / 0.85 < counterPct / 100 ? 'counter' : 'plain';
  // A few jobs are scheduled in the future: none may start before its time, whatever a worker's clock says.
  const delayMs = rng() < 0.03 ? 500 + Math.floor(rng() * 2500) : 0;
  return { queue: 'chaos', payload: { mode, workMs }, delayMs };
}

/** Produces `jobs` jobs over `durationMs`; resolves with what was acknowledged and every error seen. */
export async function produce({
  lh,
  jobs,
  durationMs,
  rng,
  maxAttempts,
  shouldStop,
  log,
  counterPct = 0,
  flowPct = 0,
  steps = 0,
  eventPct = 0,
}) {
  const acked = []; // { id, queue, mode, delayMs, ackedAt, eventKey?, eventPlan? }
  const errors = { total: 0, untyped: 0, samples: [] };
  const failed = (err, what) => {
    errors.total++;
    if (!isLeaseholdError(err)) {
      errors.untyped++;
      if (errors.samples.length < 3) errors.samples.push(String(err?.message ?? err));
    }
    if (errors.total % 50 === 1)
      log?.(`${what} failed (${err?.code ?? 'untyped'}: ${err?.message}); retrying`);
  };
  const events = eventSender(lh, failed);
  let slowestMs = 0;
  let made = 0;
  const startedAt = performance.now();
  const pending = [];
  const pendingFlows = [];
  // Each job's payload carries a reference unique to its enqueue (payload.ref): the ledger records
  // it with every downstream call, so the checker can tell two jobs apart that a failover gave
  // one id (and, with identities that did not survive it, one idempotency key).
  const refPrefix = randomBytes(4).toString('hex'); // --flow-pct: whole flows, each enqueued in one call
  while (acked.length < jobs && !shouldStop()) {
    const due = Math.min(jobs, Math.ceil((jobs * (performance.now() - startedAt)) / durationMs));
    while (made < due) {
      if (flowPct > 0 && rng() < flowPct / 100) {
        const flow = makeFlow(rng);
        pendingFlows.push(flow);
        made += flow.length;
        continue;
      }
      const job = makeJob(rng, counterPct, steps, eventPct, made);
      job.payload.ref = `${refPrefix}.${made}`;
      pending.push(job);
      made++;
    }
    if (pendingFlows.length > 0) {
      const flow = pendingFlows[0];
      try {
        const ids = await enqueueFlowJobs(lh, flow, maxAttempts);
        pendingFlows.shift();
        const ackedAt = Date.now();
        for (const [i, id] of ids.entries())
          acked.push({ id, queue: flow[i].queue, mode: 'plain', delayMs: 0, ackedAt });
      } catch (err) {
        errors.total++;
        if (!isLeaseholdError(err)) errors.untyped++;
        await sleep(200);
      }
      continue;
    }
    if (pending.length === 0) {
      await sleep(TICK_MS);
      continue;
    }
    // One call in ten enqueues a single job through enqueue(); the rest go through enqueueMany.
    const batch = takeBatch(pending, rng() < 0.1 ? 1 : MAX_BATCH);
    const callStarted = performance.now();
    try {
      // A 'before' event is sent, and acknowledged, before its workflow exists.
      await events.sendBefore(batch);
      const ids = await enqueueBatch(lh, batch, maxAttempts);
      const ackedAt = Date.now(); // when the answer arrived (the failover rig splits by it)
      ids.forEach((id, i) => {
        const job = batch[i];
        const wait = job.payload.wait;
        acked.push({
          id,
          queue: job.queue,
          mode: job.payload.mode,
          delayMs: job.delayMs,
          ackedAt,
          eventKey: wait?.key ?? null,
          eventPlan: wait?.plan ?? null,
        });
        if (wait?.plan === 'after') events.schedule(wait, ackedAt + wait.sendAfterMs);
      });
    } catch (err) {
      failed(err, 'enqueue');
      pending.unshift(...batch);
      await sleep(200);
    }
    slowestMs = Math.max(slowestMs, performance.now() - callStarted);
    if (pending.length === 0) await sleep(TICK_MS);
  }
  await events.finish();
  return { acked, errors, slowestMs, eventsSent: events.sent() };
}

/**
 * The producer's event sends (the steps workload's waits): `sendBefore` sends a batch's 'before'
 * events (each once acknowledged: a job whose send failed is not enqueued until it succeeds);
 * `schedule` queues an 'after' event, sent by a loop of its own when due, retried until sent;
 * `finish` waits until every scheduled event is sent.
 */
function eventSender(lh, failed) {
  const due = []; // { wait, at }, in the order scheduled (so by due time, within a few ms)
  const sentBefore = new Set(); // keys of 'before' events already acknowledged
  let sent = 0;
  let wake = null;
  let finishing = false;
  const send = async (wait) => {
    const { key, payload } = workflowEvent(wait);
    await lh.sendEvent(WORKFLOW_EVENT, { key, payload });
    sent++;
  };
  const loop = (async () => {
    while (!finishing || due.length > 0) {
      const next = due[0];
      if (!next) {
        await new Promise((resolve) => {
          wake = resolve;
          setTimeout(resolve, TICK_MS);
        });
        continue;
      }
      const waitMs = next.at - Date.now();
      if (waitMs > 0) {
        await sleep(Math.min(waitMs, TICK_MS));
        continue;
      }
      try {
        await send(next.wait);
        due.shift();
      } catch (err) {
        failed(err, 'sendEvent');
        await sleep(200);
      }
    }
  })();
  return {
    async sendBefore(batch) {
      for (const job of batch) {
        const wait = job.payload.wait;
        if (wait?.plan !== 'before' || sentBefore.has(wait.key)) continue;
        await send(wait);
        sentBefore.add(wait.key);
      }
    },
    schedule(wait, at) {
      due.push({ wait, at });
      wake?.();
    },
    async finish() {
      finishing = true;
      wake?.();
      await loop;
    },
    sent: () => sent,
  };
}

// Up to `limit` jobs of the queue at the head of the list.
function takeBatch(pending, limit) {
  const queue = pending[0].queue;
  const batch = [];
  for (let i = 0; i < pending.length && batch.length < limit; ) {
    if (pending[i].queue === queue) batch.push(...pending.splice(i, 1));
    else i++;
  }
  return batch;
}

async function enqueueBatch(lh, batch, maxAttempts) {
  const [first] = batch;
  if (batch.length === 1) {
    const { id } = await lh.enqueue(first.queue, first.payload, { maxAttempts, delayMs: first.delayMs });
    return [id];
  }
  const { ids } = await lh.enqueueMany(
    first.queue,
    batch.map((job) => ({ payload: job.payload, maxAttempts, delayMs: job.delayMs })),
  );
  return ids;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
