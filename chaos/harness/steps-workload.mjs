// The steps workload (`--steps N`): every job the producer makes is a workflow of N durable steps
// (job.step), half of them with a short durable sleep (job.sleep) halfway through, and some
// (`--event-pct`) waiting for an event (job.waitForEvent) before their last step, run by the
// workers under the nemesis's kills, pauses and restarts. Each step's side effect is a ledger row
// (chaos.step_effects) written, and committed, before the step returns its value: the job id, the
// step's numbered name, the claim (token, claim id, owner) that ran it, and a value unique to that
// run, which the step returns and Leasehold records. steps-checker.mjs then matches every recorded
// step to the one effect run whose value it holds; events-checker.mjs judges the waits.
import { randomUUID } from 'node:crypto';

/** The event every waiting workflow waits on (with a key of its own). */
export const WORKFLOW_EVENT = 'chaos.go';

/**
 * When a waiting workflow's event is sent: before the job is enqueued (so before its wait began:
 * it must wake it), 0.2 to 3 s after its enqueue was acknowledged (before or after the wait began),
 * or never (the wait must time out).
 */
export const EVENT_PLANS = ['before', 'after', 'never'];

/** The timeout of a wait whose event is sent: it must be the event that ends it, not the clock. */
const SENT_TIMEOUT_MS = 60_000;

/**
 * One workflow's payload: N steps of 2 to 20 ms of work each, maybe a sleep before a middle step,
 * and, for `eventPct`% of them, a wait for event `WORKFLOW_EVENT` with key `eventKey` before the
 * last step (a plan from EVENT_PLANS; a never-sent event's wait times out in 0.2 to 1.5 s).
 */
export function makeWorkflow(rng, steps, eventPct = 0, eventKey = null) {
  const sleeps = steps > 1 && rng() < 0.5;
  const workflow = {
    mode: 'steps',
    steps,
    workMs: 2 + Math.floor(rng() * 18),
    sleepBefore: sleeps ? Math.floor(steps / 2) : -1,
    sleepMs: 20 + Math.floor(rng() * 180),
  };
  if (eventKey === null || rng() >= eventPct / 100) return workflow;
  const plan = EVENT_PLANS[Math.floor(rng() * EVENT_PLANS.length)];
  const wait = {
    key: eventKey,
    plan,
    timeoutMs: plan === 'never' ? 200 + Math.floor(rng() * 1300) : SENT_TIMEOUT_MS,
    sendAfterMs: 200 + Math.floor(rng() * 2800),
    value: `${eventKey}:${Math.floor(rng() * 1e9)}`,
  };
  return { ...workflow, waitBefore: Math.max(0, steps - 1), wait };
}

/** The event a waiting workflow's producer sends: the key it waits on and a payload naming it. */
export function workflowEvent(wait) {
  return { key: wait.key, payload: { key: wait.key, value: wait.value } };
}

/**
 * A workflow's handler body: the steps in order, each running its effect only when no earlier
 * attempt recorded it. The sleep and the wait hand the job back (they throw a SnoozeError the
 * caller must let through). Nothing checks the lease before an effect: a paused holder's effect
 * may run after its lease is gone, and the fence must then refuse its record.
 */
export async function runSteps(job, { ledger, owner, claimId }) {
  const { steps, workMs, sleepBefore, sleepMs, waitBefore = -1, wait } = job.payload;
  for (let i = 0; i < steps; i++) {
    if (i === sleepBefore) await job.sleep('nap', sleepMs);
    // Woken or timed out, the workflow goes on: the checker reads the outcome from job_steps.
    if (i === waitBefore)
      await job.waitForEvent(WORKFLOW_EVENT, { key: wait.key, timeoutMs: wait.timeoutMs });
    const name = `s${i}`;
    await job.step(name, async () => {
      await new Promise((resolve) => setTimeout(resolve, workMs));
      const value = randomUUID();
      await ledger.stepEffect(job.id, `${name}#0`, job.token, claimId, owner, value);
      return value;
    });
  }
}
